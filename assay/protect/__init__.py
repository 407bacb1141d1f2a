"""`assay mcp protect`: put every stdio server of a client config behind `assay mcp wrap`
(docs/protect.md).

One job a module:

- :mod:`~assay.protect.model`: ProtectError, WrapOptions, Change, Result;
- :mod:`~assay.protect.wrapline`: the wrap line of a protected entry, written and read back
  with wrap's one option table (:mod:`assay.wrap.options`);
- :mod:`~assay.protect.jsonspans`: strict JSON with value spans;
- :mod:`~assay.protect.edit`: the sans-IO edits, :func:`protect_text` and :func:`undo_text`
  (text in, new text and one Change per server out);
- :mod:`~assay.protect.starter`: the starter policy text;
- :mod:`~assay.protect.files`: the file layer (read, backup, atomic replace, the starter
  policy, the policy check through :func:`assay.policy.load_policy_file`).

A protected server runs ``<assay> mcp wrap --policy P --label NAME [log options] -- <command>
<args...>``: every token before ``--`` is a wrap option, everything after it is the original
command line, which is how :func:`undo_text` restores it exactly.
"""

from __future__ import annotations

from assay.protect.edit import protect_text, undo_text, unified_diff
from assay.protect.files import FileOutcome, apply_to_file, check_policy, write_starter_policy
from assay.protect.model import Change, ProtectError, Result, WrapOptions
from assay.protect import state  # noqa: F401  (the record and backups: tests)
from assay.protect.starter import STARTER_POLICY
from assay.protect.wrapline import _slug, unwrap_args, wrapped_args  # noqa: F401  (_slug: tests)

__all__ = [
    "ProtectError",
    "Change",
    "Result",
    "WrapOptions",
    "wrapped_args",
    "unwrap_args",
    "protect_text",
    "undo_text",
    "unified_diff",
    "STARTER_POLICY",
    "apply_to_file",
    "FileOutcome",
    "write_starter_policy",
    "check_policy",
]
