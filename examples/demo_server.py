"""A small real MCP server (stdio) for the demo and the end-to-end tests, built on the `mcp` SDK.

Its tools work on an in-memory "workspace" so the demo never touches the real filesystem.
`exec` exists only to show a tool that the example policy denies.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

FILES = {
    "/workspace/README.md": "# Demo workspace\nHello from the demo server.\n",
    "/workspace/notes.txt": "remember: policies are code\n",
}

server = MCPServer("assay-demo-server", version="1.0.0")


@server.tool()
def read_file(path: str) -> str:
    """Read a file from the demo workspace."""
    if path not in FILES:
        raise ValueError(f"no such file: {path}")
    return FILES[path]


@server.tool()
def list_dir(path: str = "/workspace") -> list[str]:
    """List the files under a directory of the demo workspace."""
    prefix = path.rstrip("/") + "/"
    return sorted(name for name in FILES if name.startswith(prefix))


@server.tool()
def write_file(path: str, content: str) -> str:
    """Write a file in the demo workspace."""
    FILES[path] = content
    return f"wrote {len(content)} bytes to {path}"


@server.tool()
def exec(command: str) -> str:
    """Run a shell command (never actually runs anything: the policy should stop it first)."""
    return f"pretended to run: {command}"


if __name__ == "__main__":
    server.run("stdio")
