"""Unit tests of :mod:`assay.signing` (docs/tool-signing.md)."""

from __future__ import annotations

import base64
import copy
import hashlib

import pytest
from cryptography.hazmat.primitives import serialization
from hypothesis import given, settings
from hypothesis import strategies as st

from assay import signing
from assay.signing import PAYLOAD_TYPE, SIG_FIELD, SigningError, TrustPolicy, TrustedKey, VerifyError

KEY = signing.generate_key()
OTHER = signing.generate_key()
TOOL = {"name": "read_file", "description": "Read a file", "inputSchema": {"type": "object"}}


def test_k3_pae_vectors():
    assert signing.pae("application/json", b"test") == b"DSSEv1 16 application/json 4 test"
    assert len(PAYLOAD_TYPE.encode()) == 35
    assert signing.pae(PAYLOAD_TYPE, b"{}") == b"DSSEv1 35 application/vnd.assay.tool+json;v=1 2 {}"


def test_key_id_is_sha256_of_spki_der():
    der = KEY.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    assert len(der) == 44
    assert signing.key_id(KEY.public_key()) == "sha256:" + hashlib.sha256(der).hexdigest()


def test_signature_covers_pae_of_jcs_without_sig():
    signed = signing.sign_tool(TOOL, KEY)
    sig = signed[SIG_FIELD]
    assert list(sig) == ["version", "algorithm", "payload_type", "payload_digest", "key_id", "signature", "signed_at"]
    payload = b'{"description":"Read a file","inputSchema":{"type":"object"},"name":"read_file"}'
    assert signing.canonical_payload(signed) == payload
    assert sig["payload_digest"] == "sha256:" + hashlib.sha256(payload).hexdigest()
    KEY.public_key().verify(base64.b64decode(sig["signature"]), signing.pae(PAYLOAD_TYPE, payload))
    assert signing.verify_tool(signed, KEY.public_key()).key_id == signing.key_id(KEY.public_key())


def test_resigning_replaces_signature_keeps_member_order():
    signed = signing.sign_tool({"a": 1, SIG_FIELD: {"old": True}, "z": 2}, KEY, embed_pubkey=True)
    assert list(signed) == ["a", "z", SIG_FIELD]
    assert "public_key" in signed[SIG_FIELD]
    assert signing.verify_tool(signed, signing.embedded_public_key(signing.parse_signature(signed[SIG_FIELD])))


def test_sign_refuses_non_objects():
    with pytest.raises(SigningError, match="tool must be a JSON object"):
        signing.sign_tool([1, 2], KEY)


def _tampered(fn):
    signed = signing.sign_tool(TOOL, KEY)
    fn(signed)
    return signed


def _flip_signature(tool):
    raw = bytearray(base64.b64decode(tool[SIG_FIELD]["signature"]))
    raw[10] ^= 0x01
    tool[SIG_FIELD]["signature"] = base64.b64encode(bytes(raw)).decode()


def _re_digest(tool):
    """Tamper with the content *and* fix payload_digest so the signature check itself must catch it."""
    tool["description"] = "Exfiltrate"
    tool[SIG_FIELD]["payload_digest"] = "sha256:" + hashlib.sha256(signing.canonical_payload(tool)).hexdigest()


TAMPERS = {
    "description changed": (lambda t: t.update(description="Read a file and mail it"), 4, "payload digest mismatch"),
    "schema changed": (lambda t: t["inputSchema"].update(properties={"x": {}}), 4, "payload digest mismatch"),
    "member added": (lambda t: t.update(annotations={"readOnlyHint": True}), 4, "payload digest mismatch"),
    "content changed with fixed digest": (_re_digest, 4, "signature invalid: ed25519 verification failed"),
    "signature bytes flipped": (_flip_signature, 4, "signature invalid"),
    "claimed key id changed": (lambda t: t[SIG_FIELD].update(key_id="sha256:" + "0" * 64), 4, "key_id mismatch"),
    "payload type": (lambda t: t[SIG_FIELD].update(payload_type="application/json"), 4, "payload type mismatch"),
    "version": (lambda t: t[SIG_FIELD].update(version=2), 1, "unsupported version: 2"),
    "algorithm": (lambda t: t[SIG_FIELD].update(algorithm="rsa"), 1, "unsupported algorithm"),
    "not base64": (lambda t: t[SIG_FIELD].update(signature="***"), 1, "invalid base64 signature"),
    "short signature": (
        lambda t: t[SIG_FIELD].update(signature=base64.b64encode(b"x" * 63).decode()),
        1,
        "invalid signature bytes",
    ),
    "missing member": (lambda t: t[SIG_FIELD].pop("key_id"), 1, 'missing field "key_id"'),
    "signature not an object": (lambda t: t.update({SIG_FIELD: "sig"}), 1, "malformed signature"),
    "bad signed_at": (lambda t: t[SIG_FIELD].update(signed_at="yesterday"), 1, "RFC 3339"),
}


@pytest.mark.parametrize("case", list(TAMPERS))
def test_k6_tamper_verdicts(case):
    fn, code, fragment = TAMPERS[case]
    with pytest.raises(VerifyError) as info:
        signing.verify_tool(_tampered(fn), KEY.public_key())
    assert info.value.exit_code == code
    assert fragment in str(info.value)


def test_wrong_key_is_invalid_signature():
    with pytest.raises(VerifyError) as info:
        signing.verify_tool(signing.sign_tool(TOOL, KEY), OTHER.public_key())
    assert info.value.exit_code == 4 and "ed25519 verification failed" in str(info.value)


def test_non_canonical_base64_is_malformed():
    """Two base64 texts of the same 64 bytes must not both verify: trailing bits are checked."""
    signed = signing.sign_tool(TOOL, KEY)
    text = signed[SIG_FIELD]["signature"]
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    last = text[-3]  # 64 bytes -> 86 chars + "==": the last data char carries 4 spare bits
    twin = text[:-3] + alphabet[alphabet.index(last) ^ 1] + text[-2:]
    assert base64.b64decode(twin) == base64.b64decode(text)
    signed[SIG_FIELD]["signature"] = twin
    with pytest.raises(VerifyError, match="invalid base64 signature") as info:
        signing.verify_tool(signed, KEY.public_key())
    assert info.value.exit_code == 1


def test_unsigned_is_exit_2_verdict():
    with pytest.raises(VerifyError) as info:
        signing.verify_tool(TOOL, KEY.public_key())
    assert info.value.exit_code == 2


# --- keys --------------------------------------------------------------------------------------

RFC8410_V2 = b"""-----BEGIN PRIVATE KEY-----
MHICAQEwBQYDK2VwBCIEINTuctv5E1hK1bbY8fdp+K06/nwoy/HU++CXqI9EdVhC
oB8wHQYKKoZIhvcNAQkJFDEPDA1DdXJkbGUgQ2hhaXJzgSEAGb9ECWmEzf6FQbrB
Z9w7lshQhqowtrbLDFw4rXAxZuE=
-----END PRIVATE KEY-----
"""


def test_k1_pkcs8_v1_and_v2_private_keys_load():
    v1 = signing.private_key_pem(KEY)
    assert v1.startswith(b"-----BEGIN PRIVATE KEY-----")
    assert signing.key_id(signing.load_private_key_pem(v1).public_key()) == signing.key_id(KEY.public_key())
    key = signing.load_private_key_pem(RFC8410_V2)  # the example of RFC 8410, section 10.3, with publicKey
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    assert raw.hex() == "19bf44096984cdfe8541bac167dc3b96c85086aa30b6b6cb0c5c38ad703166e1"


def test_v2_with_mismatching_public_key_refused():
    der = base64.b64decode(b"".join(RFC8410_V2.splitlines()[1:-1]))
    broken = der[:-1] + bytes([der[-1] ^ 1])
    pem = b"-----BEGIN PRIVATE KEY-----\n" + base64.encodebytes(broken) + b"-----END PRIVATE KEY-----\n"
    with pytest.raises(ValueError, match="does not match"):
        signing.load_private_key_pem(pem)


def test_public_key_pem_round_trip_and_wrong_types():
    pem = signing.public_key_pem(KEY.public_key())
    assert pem.startswith(b"-----BEGIN PUBLIC KEY-----")
    assert signing.key_id(signing.load_public_key_pem(pem)) == signing.key_id(KEY.public_key())
    with pytest.raises(ValueError):
        signing.load_public_key_pem(b"not a key")
    with pytest.raises(ValueError):
        signing.load_private_key_pem(pem)


# --- trust policy (docs/tool-signing.md, "Trust policy"; one that lists no key trusts no key) ---


def test_a_trust_policy_listing_no_key_trusts_no_key():
    assert not TrustPolicy().is_key_trusted(signing.key_id(KEY.public_key()))
    assert TrustPolicy(trusted_key_ids=("sha256:a",)).is_key_trusted("sha256:a")
    assert TrustPolicy(trusted_keys=(TrustedKey("sha256:b"),)).is_key_trusted("sha256:b")


def test_key_from_trust_policy(tmp_path):
    kid = signing.key_id(KEY.public_key())
    pub = tmp_path / "pub.pem"
    pub.write_bytes(signing.public_key_pem(KEY.public_key()))
    sig = signing.parse_signature(signing.sign_tool(TOOL, KEY)[SIG_FIELD])
    with pytest.raises(VerifyError) as info:
        signing.key_from_trust_policy(TrustPolicy(), sig)
    assert info.value.exit_code == 3
    with pytest.raises(SigningError, match="is trusted but no public_key_path provided"):
        signing.key_from_trust_policy(TrustPolicy(trusted_key_ids=(kid,)), sig)
    with pytest.raises(SigningError, match="key_id mismatch for"):
        signing.key_from_trust_policy(
            TrustPolicy(trusted_key_ids=(kid,), trusted_keys=(TrustedKey("sha256:" + "1" * 64, str(pub)),)), sig
        )
    found = signing.key_from_trust_policy(TrustPolicy(trusted_keys=(TrustedKey(kid, str(pub)),)), sig)
    assert signing.key_id(found) == kid


def test_trust_policy_yaml():
    policy = signing.parse_trust_policy(
        "require_signed: true\ntrusted_key_ids: ['sha256:a']\ntrusted_keys:\n  - key_id: sha256:b\n    name: CI\n"
    )
    assert policy.require_signed and policy.trusted_key_ids == ("sha256:a",)
    assert policy.trusted_keys == (TrustedKey("sha256:b", None, "CI"),)
    assert signing.parse_trust_policy("") == TrustPolicy()
    for bad, fragment in (
        ("require_signed: yes", "require_signed must be true or false"),  # YAML 1.2: yes is a string
        ("require_signd: true", 'unknown field "require_signd"'),
        ("require_signed: true\nrequire_signed: false", "duplicate key"),
        ("- 1", "must be a mapping"),
        ("trusted_keys: [{name: x}]", "key_id must be a string"),
    ):
        with pytest.raises(SigningError, match=fragment):
            signing.parse_trust_policy(bad)


def test_strict_tool_json():
    with pytest.raises(SigningError, match="duplicate member"):
        signing.parse_tool_json(b'{"description": "a", "description": "b"}')


# --- properties --------------------------------------------------------------------------------

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53 - 1), 2**53 - 1)  # beyond it signing refuses (test_signing_numbers)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10)
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
_tools = st.dictionaries(st.text(max_size=10).filter(lambda k: k != SIG_FIELD), _values, max_size=6)


@settings(max_examples=150, deadline=None)
@given(_tools, st.booleans())
def test_property_any_tool_round_trips(tool, embed):
    """sign -> bytes on disk -> strict parse -> verify succeeds, for any JSON object whose
    integers JCS represents exactly."""
    signed = signing.sign_tool(tool, KEY, embed_pubkey=embed)
    reread = signing.parse_tool_json(signing.render_tool(signed))
    result = signing.verify_tool(reread, KEY.public_key())
    assert result.key_id == signing.key_id(KEY.public_key())
    assert signing.canonical_payload(reread) == signing.canonical_payload(tool)
    assert list(reread)[-1] == SIG_FIELD


@settings(max_examples=60, deadline=None)
@given(_tools, st.integers(min_value=2**53) | st.integers(max_value=-(2**53)))
def test_property_any_inexact_integer_is_refused(tool, number):
    with pytest.raises(signing.InexactNumberError):
        signing.sign_tool({**tool, "n": [number]}, KEY)


@settings(max_examples=60, deadline=None)
@given(_tools, st.text(min_size=1, max_size=8).filter(lambda k: k != SIG_FIELD), _values)
def test_property_any_change_is_detected(tool, key, value):
    signed = signing.sign_tool(tool, KEY)
    changed = copy.deepcopy(signed)
    changed[key] = value
    if signing.canonical_payload(changed) == signing.canonical_payload(signed):
        return  # the same canonical value (e.g. 1.0 vs 1): nothing was changed
    with pytest.raises(VerifyError) as info:
        signing.verify_tool(changed, KEY.public_key())
    assert info.value.exit_code == 4
