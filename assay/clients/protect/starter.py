"""The starter policy `assay mcp protect --init-policy` writes (docs/protect.md). A leaf module."""

from __future__ import annotations

__all__ = ["STARTER_POLICY"]

STARTER_POLICY = """\
# assay starter policy, written by `assay mcp protect --init-policy`.
#
# It is deliberately permissive so that the first launch of your client works: every tool is
# allowed, and every call is still checked and recorded. Tighten it from what you see:
#
#   1. Give `assay mcp protect` a log directory (--log-dir DIR) so each server writes a decision
#      log (DIR/<client>-<server>.decisions.ndjson: one line per tools/call, allowed or
#      denied) and an audit log (DIR/<client>-<server>.audit.ndjson). Read them after a session
#      with `assay mcp log DIR`; `assay mcp policy suggest DIR --out NEW.yaml` writes a
#      least-privilege policy from them (with protect --log-arguments it also confines paths).
#   2. List the tools you saw and want under tools.allow: once tools.allow is present, every
#      tool not listed is denied.
#   3. Deny the dangerous ones by name or pattern under tools.deny (deny beats allow).
#   4. Give each allowed tool an argument schema under schemas.<tool>.
#   5. Confine path arguments to the directories a tool may touch with path_confinement
#      (below), never with a schema pattern: "^/home/you/projects/" admits
#      "/home/you/projects/../.ssh/id_rsa", path_confinement normalizes the path first.
#
# Every key, in short: `assay mcp policy check --help`. Check this file with
# `assay mcp policy check FILE`, and ask it about one call with `assay mcp policy explain`.
version: "2.0"
name: starter

tools:
  # allow: ["read_file", "list_directory"]   # uncomment to switch to an allowlist
  deny: []                                   # e.g. ["*delete*", "exec"]

enforcement:
  # A tool without a schema is allowed. No tool has one yet, so "warn" would log every call as a
  # warning that says only that: switch to "warn" once the tools you care about have schemas (a
  # call of any other tool then stands out in the log), and to "deny" once every tool you allow
  # has one.
  unconstrained_tools: allow

# schemas:
#   read_file:
#     type: object
#     additionalProperties: false
#     required: [path]
#     properties:
#       path: {type: string}
#
# path_confinement:
#   - tools: ["read_*", "list_directory"]   # tool-name patterns, as in tools.allow
#     args: [path, paths]                    # the path arguments (a list is checked item by item)
#     within: [/home/you/projects]           # absolute directories
#
# What comes back (`assay mcp policy check --help`, inspect):
# inspect:
#   secrets: mask                            # secrets in tool results replaced by [REDACTED:<kind>]
#   injection: strip                         # instructions aimed at the model removed from results
#   descriptions: hide                       # tools whose descriptions carry such instructions hidden
#   arguments: {secrets: deny, tainted: deny}  # no call sends a secret, or a value that came back secret
"""
