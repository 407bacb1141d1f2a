"""Realistic config files, one per client, shaped like the examples in each client's own
documentation (docs/compatibility.md, 'Client configs', names the pages): other settings next
to the server map, env blocks, a remote server, comments where the client allows them."""

from __future__ import annotations

CLAUDE_DESKTOP = """\
{
  "globalShortcut": "Ctrl+Space",
  "mcpServers": {
    "filesystem": {
      "command": "npx",
      "args": [
        "-y",
        "@modelcontextprotocol/server-filesystem",
        "/Users/username/Desktop",
        "/Users/username/Downloads"
      ]
    },
    "github": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-github"],
      "env": {
        "GITHUB_PERSONAL_ACCESS_TOKEN": "<token>"
      }
    }
  }
}
"""

# ~/.claude.json: user-scope servers at the top, local-scope ones under projects.<path>.
CLAUDE_CODE_USER = """\
{
  "numStartups": 12,
  "installMethod": "native",
  "mcpServers": {
    "context7": {
      "type": "stdio",
      "command": "npx",
      "args": ["--yes", "@upstash/context7-mcp"],
      "env": {}
    },
    "notion": {
      "type": "http",
      "url": "https://mcp.notion.com/mcp"
    }
  },
  "projects": {
    "/home/u/dev/my-app": {
      "allowedTools": [],
      "mcpServers": {
        "airtable": {
          "type": "stdio",
          "command": "npx",
          "args": ["-y", "airtable-mcp-server"],
          "env": {"AIRTABLE_API_KEY": "YOUR_KEY"}
        }
      }
    }
  }
}
"""

CLAUDE_CODE_PROJECT = """\
{
  "mcpServers": {
    "shared-server": {
      "command": "/path/to/server",
      "args": [],
      "env": {}
    },
    "api": {
      "type": "http",
      "url": "${API_BASE_URL:-https://api.example.com}/mcp"
    }
  }
}
"""

CURSOR = """\
{
  "mcpServers": {
    "server-name": {
      "command": "npx",
      "args": ["-y", "mcp-server"],
      "env": {
        "API_KEY": "value"
      }
    },
    "remote": {
      "url": "http://localhost:3000/mcp",
      "headers": {"API_KEY": "value"}
    }
  }
}
"""

VSCODE = """\
{
  // Inputs are prompted on first server start, then stored securely by VS Code.
  "inputs": [
    {
      "type": "promptString",
      "id": "perplexity-key",
      "description": "Perplexity API Key",
      "password": true
    }
  ],
  "servers": {
    // https://github.com/ppl-ai/modelcontextprotocol/
    "Perplexity": {
      "type": "stdio",
      "command": "npx",
      "args": ["-y", "server-perplexity-ask"],
      "env": {
        "PERPLEXITY_API_KEY": "${input:perplexity-key}"
      }
    },
    "fetch": {
      "type": "stdio",
      "command": "uvx",
      "args": ["mcp-server-fetch"],
    },
    "github": {
      "type": "http",
      "url": "https://api.githubcopilot.com/mcp/"
    }
  }
}
"""

WINDSURF = """\
{
  "mcpServers": {
    "github": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-github"],
      "env": {
        "GITHUB_PERSONAL_ACCESS_TOKEN": "<YOUR_PERSONAL_ACCESS_TOKEN>"
      }
    },
    "figma": {
      "serverUrl": "https://example.com/figma/sse"
    }
  }
}
"""

GEMINI_CLI = """\
{
  "theme": "GitHub",
  "selectedAuthType": "gemini-api-key",
  "mcpServers": {
    "pythonTools": {
      "command": "python",
      "args": ["-m", "my_mcp_server", "--port", "8080"],
      "cwd": "./mcp-servers/python",
      "env": {
        "DATABASE_URL": "$DB_CONNECTION_STRING",
        "API_KEY": "${EXTERNAL_API_KEY}"
      },
      "timeout": 15000,
      "trust": false
    },
    "httpServer": {
      "httpUrl": "http://localhost:3000/mcp",
      "timeout": 5000
    }
  }
}
"""

CODEX = """\
# ~/.codex/config.toml
model = "gpt-5-codex"
approval_policy = "on-request"

[mcp_servers.context7]
command = "npx"
args = ["-y", "@upstash/context7-mcp"]

[mcp_servers.context7.env]
MY_ENV_VAR = "MY_ENV_VALUE"  # passed to the server

[mcp_servers.docs]
command = "docs-server"
startup_timeout_sec = 20
tool_timeout_sec = 60

[mcp_servers.figma]
url = "https://mcp.figma.com/mcp"
bearer_token_env_var = "FIGMA_OAUTH_TOKEN"
"""

ZED = """\
// Zed settings
//
// For information on how to configure Zed, see the Zed
// documentation: https://zed.dev/docs/configuring-zed
{
  "ui_font_size": 16,
  "buffer_font_size": 15,
  "context_servers": {
    "local-mcp-server": {
      "command": "some-command",
      "args": ["arg-1", "arg-2"],
      "env": {}
    },
    "remote-mcp-server": {
      "url": "https://example.com/mcp",
      "headers": { "Authorization": "Bearer <token>" }
    },
  },
}
"""

# Remote servers protect leaves as they are (docs/protect.md, "Remote servers"): none of these
# files has one (Codex's bearer_token_env_var passes on to the wrapped entry through env_vars).
REMOTE_LEFT: set[tuple[str, str]] = set()

# (client label, scope, text, stdio server names, remote server names)
CASES = [
    ("claude_desktop", "user", CLAUDE_DESKTOP, ["filesystem", "github"], []),
    ("claude_code", "user", CLAUDE_CODE_USER, ["context7", "airtable"], ["notion"]),
    ("claude_code", "project", CLAUDE_CODE_PROJECT, ["shared-server"], ["api"]),
    ("cursor", "user", CURSOR, ["server-name"], ["remote"]),
    ("vscode", "user", VSCODE, ["Perplexity", "fetch"], ["github"]),
    ("windsurf", "user", WINDSURF, ["github"], ["figma"]),
    ("gemini_cli", "user", GEMINI_CLI, ["pythonTools"], ["httpServer"]),
    ("codex", "user", CODEX, ["context7", "docs"], ["figma"]),
    ("zed", "user", ZED, ["local-mcp-server"], ["remote-mcp-server"]),
]
