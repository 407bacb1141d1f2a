"""The worked example (an observed manifest of 1,440 bytes and the candidate it must give) and
helpers to derive valid or broken observed manifests."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

from assay.manifest.digests import manifest_digest
from tests.conftest import ASSAY

OBSERVED_1440 = """{
  "schema": "assay.mcp_manifest_observed.v0",
  "status": "observed",
  "server": {
    "id": "github"
  },
  "observed": {
    "manifest_digest": "sha256:d2f0835082d49b4fb9b304bc82163aa86f92102b42b0620e09e098ffad135172",
    "canonicalization": "assay.mcp_manifest_projection.v0",
    "tool_count": 1,
    "privileged_tool_count": 1,
    "tools_list_observed": true,
    "tools_list_complete": "complete",
    "tool_digests": [
      {
        "name": "github.add_deploy_key",
        "tool_digest": "sha256:03c7e1d546c3440fb100938dcaa7578ac34ae81f28e5762e7f8a3197e272a9f6",
        "privileged": true,
        "privilege_classification": "classified",
        "action_class": "github_deploy_key",
        "field_digests": {
          "description": "sha256:7e326787191c47250d1541c8dd2e5c8e9e8c5345ef3da8b66694e32788a29d99",
          "input_schema": "sha256:52e5c928edb4433b517b5410a20c6a8a2ed87ff90b7931c000ba2a43fca3644c",
          "output_schema": "sha256:6969128f97f2ae0b5576343b492d312e1ab80eedf990f4bba8366c4622e808b5",
          "annotations": "sha256:9d456a3d9cbf04f45cec915bcf7e8f02c034bf81abc077151b74bf5b06c4234b"
        }
      }
    ]
  },
  "non_claims": [
    "does not judge whether a manifest change is malicious",
    "does not infer tools outside the observed tools/list",
    "does not detect behavior drift under identical metadata",
    "privileged is classifier-derived, not the server's own annotations"
  ]
}
""".encode()

CANDIDATE_EXPECTED = """{
  "schema": "assay.mcp_manifest_candidate.v0",
  "status": "candidate",
  "approval": "not_approved",
  "source_sha256": "sha256:61e2f26c7c0a5974bb9cdeca00cc0436c8b38f9ba347132e075b63618c75c894",
  "canonicalization": "assay.mcp_manifest_projection.v0",
  "manifest_digest": "sha256:d2f0835082d49b4fb9b304bc82163aa86f92102b42b0620e09e098ffad135172",
  "server": {
    "id": "github"
  },
  "tools": [
    {
      "name": "github.add_deploy_key",
      "tool_digest": "sha256:03c7e1d546c3440fb100938dcaa7578ac34ae81f28e5762e7f8a3197e272a9f6",
      "privileged": true,
      "privilege_classification": "classified",
      "action_class": "github_deploy_key",
      "field_digests": {
        "annotations": "sha256:9d456a3d9cbf04f45cec915bcf7e8f02c034bf81abc077151b74bf5b06c4234b",
        "description": "sha256:7e326787191c47250d1541c8dd2e5c8e9e8c5345ef3da8b66694e32788a29d99",
        "input_schema": "sha256:52e5c928edb4433b517b5410a20c6a8a2ed87ff90b7931c000ba2a43fca3644c",
        "output_schema": "sha256:6969128f97f2ae0b5576343b492d312e1ab80eedf990f4bba8366c4622e808b5"
      }
    }
  ],
  "non_claims": [
    "candidate is not an approval",
    "source_sha256 proves byte identity, not provenance",
    "does not prove the observed server is honest",
    "does not judge whether any tool is safe"
  ]
}
""".encode()

SEARCH_DIGEST = "sha256:2318d9fd63878b81e992300635172e75053e086db757e31b7ebc917a7c721697"


def observed_doc() -> dict[str, Any]:
    return json.loads(OBSERVED_1440)


def redigest(doc: dict[str, Any]) -> dict[str, Any]:
    """Make ``manifest_digest`` consistent with the file's own tool identities again."""
    doc = copy.deepcopy(doc)
    tools = doc["observed"]["tool_digests"]
    doc["observed"]["manifest_digest"] = manifest_digest((t["name"], t["tool_digest"]) for t in tools)
    return doc


def two_tool_doc() -> dict[str, Any]:
    """A valid observed manifest with two tools listed out of name order."""
    doc = observed_doc()
    doc["observed"]["tool_digests"].insert(
        0,
        {
            "name": "search",
            "tool_digest": SEARCH_DIGEST,
            "privileged": False,
            "privilege_classification": "unclassified",
        },
    )
    doc["observed"]["tool_count"] = 2
    return redigest(doc)


def dump(doc: Any) -> bytes:
    return (json.dumps(doc, indent=2) + "\n").encode()


def assay(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(ASSAY), *args], capture_output=True, timeout=60, cwd=cwd, env=env)


def listing(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())
