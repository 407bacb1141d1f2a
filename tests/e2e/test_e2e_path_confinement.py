"""End to end: path confinement (docs/policy.md, 'Path confinement') through `assay mcp wrap` in
front of the real npm `@modelcontextprotocol/server-filesystem` (pinned in package-lock.json),
rooted one directory above the workspace the policy means to allow. A `^<workspace>/` schema
pattern lets `<workspace>/../secret.txt` through and the server returns the secret; the same
policy with `path_confinement` denies it with E_PATH_CONFINEMENT and the secret never leaves.
"""

from __future__ import annotations

import trio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from _e2e_support import NODE_MODULES, RUN_TIMEOUT, WrapRun, assert_all_ended

FILESYSTEM_SERVER = NODE_MODULES / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"
SECRET = "top secret: do not hand this to a model"


def _text(result) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def _tree(tmp_path):
    root = (tmp_path / "root").resolve()
    workspace = root / "workspace"
    workspace.mkdir(parents=True)
    (workspace / "notes.txt").write_text("workspace notes\n")
    (root / "secret.txt").write_text(SECRET + "\n")
    return root, workspace


def _policy(tmp_path, workspace, *, confined: bool):
    schema = f'{{type: object, required: [path], properties: {{path: {{type: string, pattern: "^{workspace}/"}}}}}}'
    text = f'version: "2.0"\ntools:\n  allow: [read_text_file]\nschemas:\n  read_text_file: {schema}\n'
    if confined:
        text = (
            f'version: "2.0"\ntools:\n  allow: [read_text_file]\nschemas:\n'
            "  read_text_file: {type: object, required: [path], properties: {path: {type: string}}}\n"
            f"path_confinement:\n  - {{tools: [read_text_file], args: [path], within: ['{workspace}']}}\n"
        )
    path = tmp_path / ("confined.yaml" if confined else "pattern.yaml")
    path.write_text(text)
    return path


async def _calls(run: WrapRun, env: dict[str, str], paths: list[str]) -> list:
    params = StdioServerParameters(command=run.argv[0], args=run.argv[1:], env=env)
    with trio.fail_after(RUN_TIMEOUT), run.stderr.open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                await session.list_tools()
                return [await session.call_tool("read_text_file", {"path": p}) for p in paths]


async def test_dotdot_escape_reaches_the_secret_with_a_pattern_and_not_with_confinement(tmp_path, base_env):
    root, workspace = _tree(tmp_path)
    escape = f"{workspace}/../secret.txt"
    inside = f"{workspace}/notes.txt"
    server = ["node", str(FILESYSTEM_SERVER), str(root)]

    before_dir = tmp_path / "pattern"
    before_dir.mkdir()
    before = WrapRun(before_dir, _policy(tmp_path, workspace, confined=False), server)
    ok, leaked = await _calls(before, base_env, [inside, escape])
    assert ok.is_error is False and "workspace notes" in _text(ok)
    assert leaked.is_error is False and SECRET in _text(leaked)  # the hole the pattern leaves
    wraps, servers = before.pids()
    await assert_all_ended(wraps + servers)

    after_dir = tmp_path / "confined"
    after_dir.mkdir()
    after = WrapRun(after_dir, _policy(tmp_path, workspace, confined=True), server)
    ok, denied = await _calls(after, base_env, [inside, escape])
    assert ok.is_error is False and "workspace notes" in _text(ok)
    assert denied.is_error is True
    assert SECRET not in _text(denied) and SECRET not in str(denied.structured_content)
    assert "Content blocked by policy" in _text(denied)
    decisions = after.decisions()
    assert [d["decision"] for d in decisions] == ["allow", "deny"], decisions
    assert decisions[1]["reason"] == (
        f'Path argument "path" is not confined: "{escape}" (normalized "{root}/secret.txt") is outside {workspace}'
    )
    assert [a["agentic"]["error_code"] for a in after.audits() if a["decision"] == "deny"] == ["E_PATH_CONFINEMENT"]
    wraps, servers = after.pids()
    await assert_all_ended(wraps + servers)
