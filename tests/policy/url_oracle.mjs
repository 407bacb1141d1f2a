// The WHATWG reading of URIs, for tests/policy/test_fileuri_differential.py and
// tests/policy/test_resource_readings.py: one JSON string per line in (a URI), one JSON object
// per line out, in order, as a Node MCP server reads a resource URI or a path argument:
// `new URL(uri)`, then `url.fileURLToPath` for a file: URL.
//   {"ok": true, "path": "/a/b", "href": "file:///a/b"}   a file: URL: fileURLToPath's path
//   {"ok": false, "href": "https://x/", "error": "..."}   another scheme, or fileURLToPath refused it
//   {"ok": false, "error": "ERR_INVALID_URL"}             new URL refused it
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on("line", (line) => {
  const out = { ok: false };
  try {
    const url = new URL(JSON.parse(line));
    out.href = url.href;
    if (url.protocol !== "file:") {
      out.error = `scheme ${url.protocol}`;
    } else {
      out.path = fileURLToPath(url);
      out.ok = true;
    }
  } catch (err) {
    out.error = String(err.code ?? err.name);
  }
  process.stdout.write(JSON.stringify(out) + "\n");
});
