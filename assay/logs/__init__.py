"""Reading what wrap recorded (docs/log.md): `assay mcp log` and `assay mcp policy suggest`.

:mod:`assay.logs.entries` reads one line (sans-IO), :mod:`assay.logs.view` filters, merges and
formats entries (sans-IO), :mod:`assay.logs.files` finds, reads and follows the files (the I/O
shell), and :mod:`assay.logs.suggest` turns an observed session into a policy (sans-IO).
"""
