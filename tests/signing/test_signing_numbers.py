"""Numbers JCS cannot represent exactly, private key permissions and file reads of signing
(docs/tool-signing.md, 'Numbers' and 'Keys')."""

from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay import signing
from assay.canonical import MAX_EXACT_INTEGER, inexact_number, jcs_bytes
from tests.conftest import ASSAY


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}
    return subprocess.run([str(ASSAY), *args], capture_output=True, timeout=60, cwd=cwd, env=env, text=True)


@pytest.fixture
def keys(tmp_path):
    key = signing.generate_key()
    (tmp_path / "private_key.pem").write_bytes(signing.private_key_pem(key))
    (tmp_path / "private_key.pem").chmod(0o600)
    (tmp_path / "public_key.pem").write_bytes(signing.public_key_pem(key.public_key()))
    return key


def _sign_like_before(tool: dict, key) -> dict:
    """What signing produced before the rule: a signature over the JCS (double) form."""
    payload = jcs_bytes(tool)
    sig = signing.ToolSignature(
        version=1,
        algorithm="ed25519",
        payload_type=signing.PAYLOAD_TYPE,
        payload_digest=signing._sha256_digest(payload),
        key_id=signing.key_id(key.public_key()),
        signature=base64.b64encode(key.sign(signing.pae(signing.PAYLOAD_TYPE, payload))).decode(),
        signed_at="2026-01-01T00:00:00Z",
    )
    return {**tool, signing.SIG_FIELD: sig.to_json()}


def test_the_two_neighbours_had_one_canonical_form():
    assert jcs_bytes(9007199254740992) == jcs_bytes(9007199254740993)


def test_sign_refuses_an_integer_beyond_2_53_naming_the_pointer(tmp_path, keys):
    (tmp_path / "tool.json").write_text('{"name":"t","inputSchema":{"properties":{"n":{"maximum":9007199254740992}}}}')
    res = run("mcp", "tool", "sign", "tool.json", "-k", "private_key.pem", "-o", "out.json", cwd=tmp_path)
    assert res.returncode == 1
    assert res.stderr == (
        'error: integer 9007199254740992 at "/inputSchema/properties/n/maximum" is beyond '
        "±9007199254740991 and cannot be signed exactly (JCS reads numbers as doubles); "
        "write it as a string\n"
    )
    assert not (tmp_path / "out.json").exists()


def test_changing_9007199254740992_to_9007199254740993_no_longer_verifies(tmp_path, keys):
    """A signature made over 9007199254740992 (by older code) verified after the edit to ...993."""
    signed = _sign_like_before({"name": "t", "limit": 9007199254740992}, keys)
    text = json.dumps(signed).replace("9007199254740992", "9007199254740993")
    (tmp_path / "tampered.json").write_text(text)
    res = run("mcp", "tool", "verify", "tampered.json", "--pubkey", "public_key.pem", cwd=tmp_path)
    assert res.returncode == 1, res.stdout
    assert res.stderr == (
        'error: integer 9007199254740993 at "/limit" is beyond ±9007199254740991 and cannot be '
        "verified exactly (JCS reads numbers as doubles); write it as a string\n"
    )


def test_the_largest_exact_integers_still_sign_and_verify(tmp_path, keys):
    tool = {"name": "t", "a": MAX_EXACT_INTEGER, "b": -MAX_EXACT_INTEGER, "c": 1.5e300}
    signed = signing.sign_tool(tool, keys)
    assert signing.verify_tool(signed, keys.public_key()).key_id == signing.key_id(keys.public_key())
    flipped = dict(signed, a=MAX_EXACT_INTEGER - 1)
    with pytest.raises(signing.VerifyError) as info:
        signing.verify_tool(flipped, keys.public_key())
    assert info.value.exit_code == 4


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(max_size=3),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
        max_leaves=12,
    )
)
def test_inexact_number_finds_exactly_the_integers_whose_double_differs(value):
    found = inexact_number(value)

    def exact(v) -> bool:
        if isinstance(v, bool) or not isinstance(v, int):
            if isinstance(v, dict):
                return all(exact(x) for x in v.values())
            if isinstance(v, list):
                return all(exact(x) for x in v)
            return True
        return abs(v) <= MAX_EXACT_INTEGER

    assert (found is None) == exact(value)
    if found is not None:
        pointer, number = found
        node = value
        for token in pointer.split("/")[1:]:
            token = token.replace("~1", "/").replace("~0", "~")
            node = node[int(token)] if isinstance(node, list) else node[token]
        assert node == number and abs(number) > MAX_EXACT_INTEGER


def test_a_group_readable_private_key_is_used_with_one_warning(tmp_path, keys):
    (tmp_path / "tool.json").write_text('{"name":"t"}')
    (tmp_path / "private_key.pem").chmod(0o644)
    res = run("mcp", "tool", "sign", "tool.json", "-k", "private_key.pem", "-o", "out.json", cwd=tmp_path)
    assert res.returncode == 0
    assert res.stderr == (
        "warning: private key private_key.pem is readable by group or others (mode 0644); "
        "restrict it with: chmod 600 private_key.pem\n"
    )
    assert signing.is_signed(json.loads((tmp_path / "out.json").read_text()))
    (tmp_path / "private_key.pem").chmod(0o600)
    res = run("mcp", "tool", "sign", "tool.json", "-k", "private_key.pem", "-o", "out2.json", cwd=tmp_path)
    assert res.returncode == 0 and res.stderr == ""


@pytest.mark.parametrize("what", ["key", "tool", "trust", "pubkey"])
def test_fifo_inputs_are_refused_not_waited_on(tmp_path, keys, what):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "tool.json").write_text('{"name":"t"}')
    if what == "key":
        args, label = ["sign", "tool.json", "-k", "fifo", "-o", "o.json"], "private key"
    elif what == "tool":
        args, label = ["sign", "fifo", "-k", "private_key.pem", "-o", "o.json"], "tool file"
    elif what == "trust":
        args, label = ["verify", "tool.json", "--trust-policy", "fifo"], "trust policy"
    else:
        signed = signing.sign_tool({"name": "t"}, keys)
        (tmp_path / "tool.json").write_text(json.dumps(signed))
        args, label = ["verify", "tool.json", "--pubkey", "fifo"], "public key"
    res = run("mcp", "tool", *args, cwd=tmp_path)
    assert res.returncode == 1
    assert res.stderr == f"error: failed to read {label}: fifo: not a regular file (a FIFO)\n"
