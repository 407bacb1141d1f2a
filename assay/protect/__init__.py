"""`assay mcp protect`: put every stdio server of a client config behind `assay mcp wrap`
(docs/protect.md).

One job a module:

- :mod:`~assay.protect.model`: ProtectError, WrapOptions, Change, Result, and the record's
  MemberEdit and EntryRecord;
- :mod:`~assay.protect.wrapline`: the wrap line of a protected entry, written and read back
  with wrap's one option table (:mod:`assay.wrap.options`);
- :mod:`~assay.protect.jsonspans` and :mod:`~assay.protect.tomlspans`: where the values sit in
  JSON and TOML text; :mod:`~assay.protect.slots`: the entries and their value spans;
- :mod:`~assay.protect.arrays`: the text of the values protect writes;
- :mod:`~assay.protect.edit`: the sans-IO edits, :func:`protect_text` and :func:`undo_text`
  (text and record in; new text, one Change per server and the record to keep out);
- :mod:`~assay.protect.check`: every edit read back as the client reads it;
- :mod:`~assay.protect.owned`: is a wrap line exactly what protect writes (undo without a record);
- :mod:`~assay.protect.starter`: the starter policy text;
- :mod:`~assay.protect.state`: the record and the backups in assay's state directory;
- :mod:`~assay.protect.files`: the file layer (read, backup, record, atomic replace, the starter
  policy, the policy check through :func:`assay.policy.load_policy_file`).

A protected server runs ``<assay> mcp wrap --policy P --label NAME [options] -- <command>
<args...>``: every token before ``--`` is a wrap option, everything after it is the original
command line. Undo puts back the exact original text protect's record holds
(docs/protect.md, "Undo").
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
