"""A small real MCP server (stdio) for the flow-rule example (examples/flows.yaml) and its
end-to-end tests, built on the `mcp` SDK.

Nothing here touches the network or the filesystem: the "secrets", files, mails, posts, tests
and deploys are all pretend, so the example shows only what the policy lets through. The tools
declare no ``outputSchema`` (``structured_output=False``), so wrap's denies of them carry the
deny payload as ``structuredContent`` (docs/wrap.md, "Deny replies").
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

SECRETS = {"api_key": "sk-demo-" + "0000"}  # in pieces: no detector finds a secret in the sources (docs/inspect.md)
FILES = {"/workspace/README.md": "# Flows demo\n", "/secrets/token": "demo-token\n"}

server = MCPServer("assay-flows-server", version="1.0.0")
state = {"tests_run": 0, "deploys": 0, "sent": 0}
tool = server.tool(structured_output=False)


@tool
def read_secret(name: str) -> str:
    """Read a secret by name (pretend values)."""
    if name not in SECRETS:
        raise ValueError(f"no such secret: {name}")
    return SECRETS[name]


@tool
def read_file(path: str) -> str:
    """Read a file of the pretend workspace."""
    if path not in FILES:
        raise ValueError(f"no such file: {path}")
    return FILES[path]


@tool
def send_email(to: str, body: str) -> str:
    """Send an email (pretend)."""
    state["sent"] += 1
    return f"sent {len(body)} characters to {to}"


@tool
def http_post(url: str, body: str = "") -> str:
    """POST to a URL (pretend)."""
    state["sent"] += 1
    return f"posted {len(body)} characters to {url}"


@tool
def run_tests() -> str:
    """Run the test suite (pretend)."""
    state["tests_run"] += 1
    return "12 passed"


@tool
def deploy(target: str = "staging") -> str:
    """Deploy (pretend)."""
    state["deploys"] += 1
    return f"deployed to {target}"


if __name__ == "__main__":
    server.run("stdio")
