// The WHATWG reading of file: URIs, for tests/policy/test_fileuri_differential.py: one JSON
// string per line in (a URI), one JSON object per line out, in order, as a Node MCP server
// reads a resource URI or a path argument: `new URL(uri)` then `url.fileURLToPath`.
//   {"ok": true, "path": "/a/b", "href": "file:///a/b"}   fileURLToPath's path
//   {"ok": false, "error": "ERR_INVALID_URL"}             new URL or fileURLToPath refused it
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on("line", (line) => {
  let out;
  try {
    const url = new URL(JSON.parse(line));
    if (url.protocol !== "file:") {
      out = { ok: false, error: `scheme ${url.protocol}` };
    } else {
      out = { ok: true, path: fileURLToPath(url), href: url.href };
    }
  } catch (err) {
    out = { ok: false, error: String(err.code ?? err.name) };
  }
  process.stdout.write(JSON.stringify(out) + "\n");
});
