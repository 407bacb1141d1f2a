"""`assay mcp protect`: put every server of a client config, stdio or remote, behind `assay mcp
wrap` (docs/protect.md).

One job a module:

- :mod:`~assay.clients.protect.model`: ProtectError, WrapOptions, Change, Result, the record's
  MemberEdit and EntryRecord, Slot (with Adder, Member) and Remote: the types every module below
  shares, so none imports another for its types;
- :mod:`~assay.clients.protect.wrapline`: the wrap line of a protected entry, written and read back
  with wrap's one option table (:mod:`assay.wrap.options`);
- :mod:`~assay.clients.protect.jsonspans` and :mod:`~assay.clients.protect.tomlspans`: where the values sit in
  JSON and TOML text (:mod:`~assay.clients.protect.tomltext`: TOML strings and comments);
  :mod:`~assay.clients.protect.slots`: the entries and their value spans;
- :mod:`~assay.clients.protect.arrays`: the text of the values protect writes;
- :mod:`~assay.clients.protect.edit`: the sans-IO edit :func:`protect_text` (text and record in;
  new text, one Change per server and the record to keep out); :mod:`~assay.clients.protect.undo`:
  :func:`undo_text` (``force``: an entry edited since protect unwrapped as it is now);
- :mod:`~assay.clients.protect.check`: every edit read back as the client reads it;
- :mod:`~assay.clients.protect.owned`: is a wrap line exactly what protect writes (undo without a record);
- :mod:`~assay.clients.protect.masking`: what protect shows of a config (the dry run's diff,
  header and env values hidden);
- :mod:`~assay.clients.protect.starter`: the starter policy text;
- :mod:`~assay.clients.protect.state`: the record and the backups in assay's state directory;
- :mod:`~assay.clients.protect.files`: the file layer (read, backup, record, atomic replace, the starter
  policy, the policy check through :func:`assay.policy.load_policy_file`).

A protected server runs ``<assay> mcp wrap --policy P --label NAME [options] -- <command>
<args...>``: every token before ``--`` is a wrap option, everything after it is the original
command line. Undo puts back the exact original text protect's record holds
(docs/protect.md, "Undo").
"""

from __future__ import annotations

from assay.clients.protect.edit import protect_text, unified_diff
from assay.clients.protect.undo import original_line, undo_text
from assay.clients.protect.masking import shown_diff
from assay.clients.protect.files import FileOutcome, apply_to_file, check_policy, write_starter_policy
from assay.clients.protect.model import Change, ProtectError, Result, WrapOptions
from assay.clients.protect import state  # noqa: F401  (the record and backups: tests)
from assay.clients.protect.starter import STARTER_POLICY
from assay.clients.protect.wrapline import _slug, unwrap_args, wrapped_args  # noqa: F401  (_slug: tests)

__all__ = [
    "ProtectError",
    "Change",
    "Result",
    "WrapOptions",
    "wrapped_args",
    "unwrap_args",
    "protect_text",
    "undo_text",
    "original_line",
    "unified_diff",
    "shown_diff",
    "STARTER_POLICY",
    "apply_to_file",
    "FileOutcome",
    "write_starter_policy",
    "check_policy",
]
