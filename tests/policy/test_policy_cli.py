"""`assay mcp policy check|explain` as a user runs them (docs/policy-tools.md)."""

from __future__ import annotations

import json
import os
import subprocess

from tests.conftest import ASSAY


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
    return subprocess.run(
        [str(ASSAY), "mcp", "policy", *args], capture_output=True, timeout=60, text=True, env={**base, **(env or {})}
    )


CLEAN = """version: "2.0"
tools: {allow: [read_file, write_file], deny: [exec], approval_required: [write_file]}
schemas:
  read_file: {type: object, required: [path], properties: {path: {type: string}}}
path_confinement:
  - {tools: [read_file], args: [path], within: [/workspace]}
"""


def test_check_a_clean_file(tmp_path):
    p = tmp_path / "assay.yaml"
    p.write_text(CLEAN)
    res = run("check", str(p))
    assert res.returncode == 0, res.stderr
    assert res.stdout == (
        f"ok: {p} loads: version 2.0, 2 tool patterns allowed, 1 deny pattern, 1 schema, "
        "unconstrained tools: warn, 1 path rule, 1 approval pattern\n"
    )
    assert res.stderr == ""


def test_check_prints_warnings_and_strict_fails_on_them(tmp_path):
    p = tmp_path / "assay.yaml"
    p.write_text('version: "2.0"\ntools: {allow: [a]}\nschemas:\n  b: {type: string, pattern: "("}\n')
    res = run("check", str(p))
    assert res.returncode == 0
    lines = res.stdout.splitlines()
    assert lines[0].startswith(f"{p}: schemas.b: does not compile, so every call of b is denied (E_SCHEMA_COMPILE): ")
    assert lines[1].startswith(f"ok: {p} loads with 1 warning: version 2.0, 1 tool pattern allowed")
    strict = run("check", "--strict", str(p))
    assert strict.returncode == 1
    assert strict.stdout.splitlines()[:1] == lines[:1]
    assert strict.stdout.splitlines()[1].startswith(f"warnings: {p} loads with 1 warning")


def test_check_an_unknown_key_is_an_error_with_what_it_misspells(tmp_path):
    # docs/policy-tools.md, "assay mcp policy check": wrap loads the file and ignores the key
    # (with a warning that names the likely key); check says it is wrong and exits 1
    p = tmp_path / "assay.yaml"
    p.write_text(
        'version: "2.0"\ntools:\n  allow: [deploy]\n  approvals_required: [deploy]\nfoo: 1\n'
        'schemas:\n  b: {type: string, pattern: "("}\n'
        "sequences:\n  - {type: never_after, trigger: a, forbidden: b, fro: 1h}\n"
    )
    res = run("check", str(p))
    assert res.returncode == 1, res.stderr
    lines = res.stdout.splitlines()
    assert lines[:3] == [
        f"{p}: error: unknown key foo: wrap ignores it",
        f"{p}: error: unknown key tools.approvals_required (did you mean tools.approval_required?): wrap ignores it",
        f"{p}: error: unknown key sequences[0].fro (did you mean sequences[0].for?): wrap ignores it",
    ]
    assert lines[3].startswith(f"{p}: schemas.b: does not compile")
    assert lines[4].startswith(f"error: {p} loads with 3 unknown keys and 1 warning: version 2.0")
    assert res.stderr == ""
    seen: list[str] = []
    from assay.policy import load_policy

    policy = load_policy(p.read_bytes(), source="assay.yaml", warn=seen.append)  # wrap loads it, the key ignored
    assert policy.tools.approval_required is None
    assert "assay.yaml: unknown key ignored: tools.approvals_required (did you mean tools.approval_required?)" in seen


def test_check_a_remote_ref_is_warned_about_once(tmp_path):
    p = tmp_path / "assay.yaml"
    p.write_text('version: "2.0"\nschemas:\n  b: {type: object, properties: {x: {$ref: "https://e.com/s"}}}\n')
    res = run("check", str(p))
    assert res.returncode == 0
    assert [line for line in res.stdout.splitlines() if "schemas.b" in line] == [
        f"{p}: schemas.b.properties.x.$ref: remote, file: and relative references are never fetched, so this "
        "schema will not compile and calls it covers are denied (E_SCHEMA_COMPILE)"
    ]


def test_check_v1_under_strict_deprecations_and_files_that_do_not_load(tmp_path):
    p = tmp_path / "v1.yaml"
    p.write_text('version: "1.0"\ntools: {allow: [a]}\n')
    assert run("check", str(p)).returncode == 0
    for res in (
        run("check", str(p), env={"ASSAY_STRICT_DEPRECATIONS": "1"}),
        run("check", "--deny-deprecations", str(p)),
    ):
        assert res.returncode == 2 and res.stdout == ""
        assert res.stderr.startswith("fatal: ") and res.stderr.count("\n") == 1
    bad = tmp_path / "bad.yaml"
    bad.write_text("tools: [1\n")
    res = run("check", str(bad))
    assert res.returncode == 2 and res.stderr.startswith(f"fatal: {bad}:") and res.stderr.count("\n") == 1
    res = run("check", "/dev/zero")
    assert res.returncode == 2
    assert res.stderr == "fatal: cannot read policy /dev/zero: not a regular file (a character device)\n"
    res = run("explain", str(bad), "--tool", "x")
    assert res.returncode == 2 and res.stderr.startswith(f"fatal: {bad}:") and res.stderr.count("\n") == 1


def test_explain_a_deny_text_and_json(tmp_path):
    p = tmp_path / "assay.yaml"
    p.write_text(CLEAN)
    res = run("explain", str(p), "--tool", "read_file", "--args", '{"path": "/workspace/../etc/passwd"}')
    assert res.returncode == 1, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == '"read_file" on server "default-mcp-server": deny (E_PATH_CONFINEMENT)'
    assert lines[1].startswith('reason: Path argument "path" is not confined')
    assert lines[2] == "rule: path_confinement"
    checks = [line.split()[0] for line in lines[3:]]
    assert checks == ["n/a", "n/a", "pass", "pass", "pass", "n/a", "FAIL", "not", "not", "not", "not"]
    res = run("explain", str(p), "--tool", "read_file", "--args", '{"path": "/workspace/a"}', "--json")
    assert res.returncode == 0
    doc = json.loads(res.stdout)
    assert doc["verdict"] == "allow" and doc["agrees"] is True and doc["matched_rule"] == "tools.allow"
    assert [s["check"] for s in doc["steps"]][-4:] == ["declared baseline", "rate limits", "flow rules", "approvals"]


def test_explain_needs_approval_denied_and_bad_args(tmp_path):
    p = tmp_path / "assay.yaml"
    p.write_text(CLEAN)
    res = run("explain", str(p), "--tool", "write_file")
    assert res.returncode == 0
    assert (
        res.stdout.splitlines()[0]
        == '"write_file" on server "default-mcp-server": needs approval (E_TOOL_UNCONSTRAINED)'
    )
    res = run("explain", str(p), "--tool", "exec")
    assert res.returncode == 1 and "deny (E_TOOL_DENIED)" in res.stdout and 'tools.deny "exec"' in res.stdout
    for bad in ("{bad", '{"a": 1, "a": 2}', "NaN", ""):
        res = run("explain", str(p), "--tool", "read_file", "--args", bad)
        assert res.returncode == 2, bad
        assert res.stderr.startswith("assay: error: --args is not one JSON text") and res.stderr.count("\n") == 1
        assert res.stdout == ""


def test_the_runs_shown_in_docs_policy_tools_are_what_the_commands_print(tmp_path):
    """docs/policy-tools.md: every ```text block that starts with `$ assay mcp policy ...` run
    on the page's example prints that (the block that shows a misspelt key runs on the example
    with `approval_required` misspelt `approvals_required`; a block with `--claims` runs on the
    example of docs/policy.md, "Policy by user (serve)", as the page says)."""
    import re
    import shlex

    from tests.conftest import REPO
    from tests.docs_examples import policy_examples

    page = REPO / "docs" / "policy-tools.md"
    example = policy_examples(page)["tools-demo"]
    blocks = re.findall(r"^```text\n\$ (assay mcp policy .*?)\n(.*?)^```", page.read_text(), re.S | re.M)
    assert len(blocks) >= 3 and any("approvals_required" in shown for _, shown in blocks)
    for command, shown in blocks:
        args = shlex.split(command)[3:]
        misspelt = "approvals_required" in shown
        text = example.replace("approval_required", "approvals_required") if misspelt else example
        (tmp_path / "assay.yaml").write_text(policy_examples()["users"] if "--claims" in args else text)
        res = subprocess.run(
            [str(ASSAY), "mcp", "policy", *args], capture_output=True, text=True, timeout=60, cwd=tmp_path
        )
        assert res.stdout == shown, command


def test_explain_shows_the_inspection_of_what_a_call_sends(tmp_path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text(
        'version: "2.0"\ntools: {allow: ["*"]}\nenforcement: {unconstrained_tools: allow}\n'
        "inspect: {secrets: mask, arguments: {secrets: deny}}\n"
    )
    key = "AKIA" + "QWERTYUIOP123456"
    res = run("explain", str(policy), "--tool", "send", "--args", json.dumps({"body": key}))
    assert res.returncode == 1, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == '"send" on server "default-mcp-server": deny (E_ARGUMENT_SECRET)'
    assert "inspection" in next(line for line in lines if line.startswith("  FAIL"))
    assert key not in res.stdout
    res = run("explain", str(policy), "--tool", "send", "--args", '{"body": "hi"}')
    assert res.returncode == 0 and "inspect.arguments.secrets deny" in res.stdout


def test_check_says_what_inspect_does_and_warns_when_nothing_is_ever_tainted(tmp_path) -> None:
    p = tmp_path / "assay.yaml"
    p.write_text('version: "2.0"\ntools: {allow: ["*"]}\ninspect: {arguments: {tainted: deny}}\nprompts: {deny: [x]}\n')
    res = run("check", "--strict", str(p))
    assert res.returncode == 1
    assert res.stdout.splitlines()[0].endswith(
        "inspect.arguments.tainted: nothing is ever tainted (no tool has taint: "
        "true and no result is looked at for secrets), so no call is judged by it"
    )
    assert "inspect: arguments.tainted deny, prompts under the policy" in res.stdout
    p.write_text('version: "2.0"\ntools: {allow: ["*"]}\ninspect: {secrets: mask, arguments: {tainted: deny}}\n')
    res = run("check", "--strict", str(p))
    assert res.returncode == 0 and "inspect: secrets mask arguments.tainted deny" in res.stdout
