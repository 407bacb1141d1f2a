"""The shared sessions of one machine (docs/wrap.md, "Shared sessions"): where their database
lives (:mod:`assay.sessions.paths`), which session a wrap belongs to (:mod:`assay.sessions.keys`)
and the SQLite store itself (:mod:`assay.sessions.sqlite`).

This package imports nothing on its own: a wrap that shares no state never loads sqlite3.
"""
