"""The shared sessions of one machine (docs/wrap.md, "Shared sessions"): where their database
lives (:mod:`assay.statedir`), which session a wrap belongs to (:mod:`assay.store.keys`)
and the SQLite store itself (:mod:`assay.store.sqlite`).

This package imports nothing on its own: a wrap that shares no state never loads sqlite3.
"""
