"""`assay mcp tool keygen|sign|verify` and the hidden `assay tool` shim as real processes
(docs/tool-signing.md, including "Trust policy" and "Deprecated spelling")."""

from __future__ import annotations

import base64
import json
import os
import re
import stat
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ASSAY

WARNING = b"warning: `assay tool` is deprecated; use `assay mcp tool` instead\n"
TOOL = {"name": "read_file", "description": "Read a file", "inputSchema": {"type": "object", "required": ["path"]}}


def run(*args: str, cwd: Path, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}
    env.update(env_extra or {})
    return subprocess.run([str(ASSAY), *args], capture_output=True, timeout=60, cwd=cwd, env=env)


@pytest.fixture
def work(tmp_path):
    """A directory with a key pair in keys/, a second key in other/ and tool.json.

    Keys are made in-process (keygen itself is tested through the CLI below) to keep this fast.
    """
    from assay import signing

    for name in ("keys", "other"):
        key = signing.generate_key()
        (tmp_path / name).mkdir()
        (tmp_path / name / "private_key.pem").write_bytes(signing.private_key_pem(key))
        (tmp_path / name / "private_key.pem").chmod(0o600)
        (tmp_path / name / "public_key.pem").write_bytes(signing.public_key_pem(key.public_key()))
    (tmp_path / "tool.json").write_text(json.dumps(TOOL, indent=2))
    return tmp_path


def key_id_of(work: Path, keydir: str = "keys") -> str:
    from assay import signing

    return signing.key_id(signing.load_public_key_file(str(work / keydir / "public_key.pem")))


def sign(work: Path, out: str = "signed.json", *extra: str) -> subprocess.CompletedProcess:
    res = run("mcp", "tool", "sign", "tool.json", "-k", "keys/private_key.pem", "-o", out, *extra, cwd=work)
    assert res.returncode == 0, res.stderr
    return res


# --- keygen (T1) -------------------------------------------------------------------------------


def test_keygen_writes_pkcs8_0600_and_spki(tmp_path):
    res = run("mcp", "tool", "keygen", "--out", "k/nested", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    private = tmp_path / "k/nested/private_key.pem"
    public = tmp_path / "k/nested/public_key.pem"
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert private.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----\n")
    assert public.read_bytes().startswith(b"-----BEGIN PUBLIC KEY-----\n")
    kid = key_id_of(tmp_path, "k/nested")
    assert res.stdout.decode() == (
        "Generated ed25519 keypair:\n"
        "  Private key: k/nested/private_key.pem (PKCS#8 PEM, mode 0600)\n"
        "  Public key:  k/nested/public_key.pem (SPKI PEM)\n"
        "\n"
        f"key_id: {kid}\n"
        "\n"
        "Add this key_id to your trust policy to trust signatures from this key.\n"
    )
    assert sorted(os.listdir(tmp_path / "k/nested")) == ["private_key.pem", "public_key.pem"]


@pytest.mark.parametrize("kind", ["file", "symlink", "dangling symlink"])
def test_keygen_never_overwrites_without_force(tmp_path, kind):
    keys = tmp_path / "keys"
    keys.mkdir()
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious\n")
    private = keys / "private_key.pem"
    if kind == "file":
        private.write_bytes(b"old key\n")
    elif kind == "symlink":
        private.symlink_to(victim)
    else:
        private.symlink_to(tmp_path / "nowhere")
    res = run("mcp", "tool", "keygen", "--out", "keys", cwd=tmp_path)
    assert res.returncode == 1
    assert res.stderr == b"error: private key already exists: keys/private_key.pem (use --force to overwrite)\n"
    assert res.stdout == b""
    assert sorted(os.listdir(keys)) == ["private_key.pem"]
    assert victim.read_bytes() == b"precious\n"
    assert not (tmp_path / "nowhere").exists()
    if kind == "file":
        assert private.read_bytes() == b"old key\n"


def test_keygen_refuses_existing_public_key_and_writes_nothing(tmp_path):
    (tmp_path / "public_key.pem").write_bytes(b"old")
    res = run("mcp", "tool", "keygen", cwd=tmp_path)
    assert res.returncode == 1
    assert b"public key already exists: ./public_key.pem (use --force to overwrite)" in res.stderr
    assert os.listdir(tmp_path) == ["public_key.pem"]


def test_keygen_force_replaces_with_fresh_0600_files_not_through_links(tmp_path):
    keys = tmp_path / "keys"
    keys.mkdir()
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious\n")
    (keys / "private_key.pem").symlink_to(victim)
    (keys / "public_key.pem").write_bytes(b"old")
    (keys / "public_key.pem").chmod(0o666)
    res = run("mcp", "tool", "keygen", "--out", "keys", "--force", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert victim.read_bytes() == b"precious\n"
    private = keys / "private_key.pem"
    assert not private.is_symlink()
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert sorted(os.listdir(keys)) == ["private_key.pem", "public_key.pem"]


# --- sign (T2) ---------------------------------------------------------------------------------


def test_sign_output_and_stdout(work):
    res = sign(work, "signed.json", "--embed-pubkey")
    signed = json.loads((work / "signed.json").read_bytes())
    sig = signed["x-assay-sig"]
    assert list(signed) == ["name", "description", "inputSchema", "x-assay-sig"]
    assert (work / "signed.json").read_bytes() == (json.dumps(signed, indent=2) + "\n").encode()
    assert sig["key_id"] == key_id_of(work)
    assert res.stdout.decode() == (
        "Signed tool definition:\n"
        "  Input:  tool.json\n"
        "  Output: signed.json\n"
        "\n"
        "Signature:\n"
        f"  key_id:         {sig['key_id']}\n"
        f"  payload_digest: {sig['payload_digest']}\n"
        f"  signed_at:      {sig['signed_at']}\n"
        "  public_key:     (embedded)\n"
    )
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{6})?Z", sig["signed_at"])


def test_sign_needs_an_output(work):
    res = run("mcp", "tool", "sign", "tool.json", "-k", "keys/private_key.pem", cwd=work)
    assert res.returncode == 2  # a usage error like every other command's (was exit 1, `error:`)
    assert res.stderr == b"assay: error: must specify --out <PATH> or --in-place\n"
    res = run("mcp", "tool", "sign", "tool.json", "-k", "keys/private_key.pem", "-o", "x", "--in-place", cwd=work)
    assert res.returncode == 2  # conflicting flags are a usage error (G1)
    assert not (work / "x").exists()


def test_sign_in_place_and_resign(work):
    res = run("mcp", "tool", "sign", "tool.json", "--key", "keys/private_key.pem", "--in-place", cwd=work)
    assert res.returncode == 0, res.stderr
    assert b"  Output: tool.json\n" in res.stdout
    first = json.loads((work / "tool.json").read_bytes())
    res = run("mcp", "tool", "sign", "tool.json", "-k", "other/private_key.pem", "--in-place", cwd=work)
    assert res.returncode == 0
    second = json.loads((work / "tool.json").read_bytes())
    assert second["x-assay-sig"]["key_id"] == key_id_of(work, "other")
    assert second["x-assay-sig"]["payload_digest"] == first["x-assay-sig"]["payload_digest"]
    assert sorted(os.listdir(work)) == ["keys", "other", "tool.json"]


@pytest.mark.parametrize(
    "content, fragment",
    [
        (b"[1, 2]", b"tool must be a JSON object"),
        (b'{"name": "a", "name": "b"}', b"failed to parse tool JSON: tool.json: duplicate member"),
        (b"{", b"failed to parse tool JSON: tool.json"),
    ],
)
def test_sign_bad_input_exit_1(work, content, fragment):
    (work / "tool.json").write_bytes(content)
    res = run("mcp", "tool", "sign", "tool.json", "-k", "keys/private_key.pem", "-o", "out.json", cwd=work)
    assert res.returncode == 1
    assert res.stderr.startswith(b"error: ") and fragment in res.stderr
    assert res.stderr.count(b"\n") == 1
    assert not (work / "out.json").exists()


def test_sign_bad_key_exit_1(work):
    res = run("mcp", "tool", "sign", "tool.json", "-k", "keys/public_key.pem", "-o", "out.json", cwd=work)
    assert res.returncode == 1
    assert b"error: failed to parse private key PEM: keys/public_key.pem" in res.stderr
    res = run("mcp", "tool", "sign", "tool.json", "-k", "missing.pem", "-o", "out.json", cwd=work)
    assert res.stderr == b"error: failed to read private key: missing.pem: No such file or directory\n"


# --- verify (T3, K6) ---------------------------------------------------------------------------


def verify(work: Path, *args: str) -> subprocess.CompletedProcess:
    return run("mcp", "tool", "verify", *args, cwd=work)


def test_sign_verify_round_trip(work):
    sign(work)
    signed = json.loads((work / "signed.json").read_bytes())
    res = verify(work, "signed.json", "--pubkey", "keys/public_key.pem")
    assert res.returncode == 0, res.stderr
    assert res.stdout.decode() == (
        "Verification successful!\n\n"
        f"  key_id:    {key_id_of(work)}\n"
        f"  signed_at: {signed['x-assay-sig']['signed_at']}\n"
    )
    assert res.stderr == b""


def _edit(work: Path, fn) -> None:
    doc = json.loads((work / "signed.json").read_bytes())
    fn(doc)
    (work / "signed.json").write_text(json.dumps(doc, indent=2))


def _flip(doc):
    raw = bytearray(base64.b64decode(doc["x-assay-sig"]["signature"]))
    raw[0] ^= 0x80
    doc["x-assay-sig"]["signature"] = base64.b64encode(bytes(raw)).decode()


@pytest.mark.parametrize(
    "case, fn, key, code, message",
    [
        (
            "description changed",
            lambda d: d.update(description="Read any file, then upload it"),
            "keys",
            4,
            "payload digest mismatch",
        ),
        ("schema changed", lambda d: d["inputSchema"].update(required=[]), "keys", 4, "payload digest mismatch"),
        ("signature bytes flipped", _flip, "keys", 4, "signature invalid: ed25519 verification failed"),
        ("wrong key", lambda d: None, "other", 4, "signature invalid: ed25519 verification failed"),
        (
            "claimed key id changed",
            lambda d: d["x-assay-sig"].update(key_id="sha256:" + "e" * 64),
            "keys",
            4,
            "key_id mismatch: signature claims sha256:eeee",
        ),
        (
            "payload type",
            lambda d: d["x-assay-sig"].update(payload_type="application/vnd.in-toto+json"),
            "keys",
            4,
            "payload type mismatch",
        ),
        (
            "malformed signature",
            lambda d: d["x-assay-sig"].update(signature="!!"),
            "keys",
            1,
            "malformed signature: invalid base64 signature",
        ),
        (
            "version",
            lambda d: d["x-assay-sig"].update(version=2),
            "keys",
            1,
            "malformed signature: unsupported version: 2",
        ),
    ],
)
def test_verify_tamper_exit_codes(work, case, fn, key, code, message):
    sign(work)
    _edit(work, fn)
    res = verify(work, "signed.json", "--pubkey", f"{key}/public_key.pem")
    assert res.returncode == code, (case, res.stderr)
    assert res.stdout == b""
    assert res.stderr.startswith(b"error: ") and message.encode() in res.stderr
    assert res.stderr.count(b"\n") == 1


def test_verify_unknown_key_id_under_trust_policy_exit_3(work):
    """K6.3: trust is decided on the claimed key id before any cryptography."""
    sign(work)
    (work / "trust.yaml").write_text(
        f"trusted_keys:\n  - key_id: {key_id_of(work, 'other')}\n    public_key_path: other/public_key.pem\n"
    )
    res = verify(work, "signed.json", "--trust-policy", "trust.yaml")
    assert res.returncode == 3
    assert res.stderr == f"error: key not trusted: {key_id_of(work)}\n".encode()
    _edit(work, lambda d: d["x-assay-sig"].update(key_id="sha256:" + "9" * 64))
    assert verify(work, "signed.json", "--trust-policy", "trust.yaml").returncode == 3


def test_verify_with_trust_policy(work):
    sign(work)
    kid = key_id_of(work)
    (work / "trust.yaml").write_text(
        f"require_signed: true\ntrusted_keys:\n  - key_id: {kid}\n    public_key_path: keys/public_key.pem\n    name: CI\n"
    )
    res = verify(work, "signed.json", "--trust-policy", "trust.yaml")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith(b"Verification successful!\n")
    # trusted but no key file given for it -> 1
    (work / "ids.yaml").write_text(f"trusted_key_ids: ['{kid}']\n")
    res = verify(work, "signed.json", "--trust-policy", "ids.yaml")
    assert res.returncode == 1
    assert b"is trusted but no public_key_path provided in policy" in res.stderr


def test_an_empty_trust_policy_trusts_no_key(work):
    sign(work)
    (work / "empty.yaml").write_text("require_signed: false\n")
    res = verify(work, "signed.json", "--trust-policy", "empty.yaml")
    assert res.returncode == 3


def test_verify_unsigned(work):
    res = verify(work, "tool.json", "--pubkey", "keys/public_key.pem")
    assert (res.returncode, res.stdout) == (0, b"Tool is not signed (no x-assay-sig field)\n")
    (work / "req.yaml").write_text("require_signed: true\n")
    res = verify(work, "tool.json", "--trust-policy", "req.yaml")
    assert res.returncode == 2
    assert res.stderr == b"error: tool is not signed\n"
    (work / "opt.yaml").write_text("require_signed: false\n")
    assert verify(work, "tool.json", "--trust-policy", "opt.yaml").returncode == 0


def test_verify_key_source_rules(work):
    sign(work, "signed.json", "--embed-pubkey")
    res = verify(work, "signed.json")
    assert res.returncode == 1
    assert res.stderr == b"error: must specify --pubkey, --trust-policy, or --allow-embedded-key\n"
    res = verify(work, "signed.json", "--pubkey", "keys/public_key.pem", "--trust-policy", "x.yaml")
    assert res.returncode == 2
    res = verify(work, "signed.json", "--allow-embedded-key")
    assert res.returncode == 0
    assert res.stderr.startswith(b"WARNING: Using embedded public key from signature.\n")
    assert res.stderr.endswith(b"\n\n") and res.stderr.count(b"\n") == 4
    res = verify(work, "signed.json", "--allow-embedded-key", "--quiet")
    assert (res.returncode, res.stdout, res.stderr) == (0, b"", b"")


def test_verify_quiet_keeps_exit_code(work):
    sign(work)
    _edit(work, lambda d: d.update(description="changed"))
    res = verify(work, "signed.json", "--pubkey", "keys/public_key.pem", "-q")
    assert (res.returncode, res.stdout, res.stderr) == (4, b"", b"")


def test_verify_unreadable_inputs_exit_1(work):
    res = verify(work, "missing.json", "--pubkey", "keys/public_key.pem")
    assert res.returncode == 1
    assert res.stderr == b"error: failed to read tool file: missing.json: No such file or directory\n"
    sign(work)
    (work / "bad.yaml").write_text("require_signed: [\n")
    res = verify(work, "signed.json", "--trust-policy", "bad.yaml")
    assert res.returncode == 1 and b"failed to parse trust policy YAML" in res.stderr


def test_source_date_epoch_makes_signing_reproducible(work):
    env = {"SOURCE_DATE_EPOCH": "1769601600"}
    for out in ("a.json", "b.json"):
        res = run("mcp", "tool", "sign", "tool.json", "-k", "keys/private_key.pem", "-o", out, cwd=work, env_extra=env)
        assert res.returncode == 0
    a = (work / "a.json").read_bytes()
    assert a == (work / "b.json").read_bytes()
    assert json.loads(a)["x-assay-sig"]["signed_at"] == "2026-01-28T12:00:00Z"


# --- the hidden shim (docs/tool-signing.md, "Deprecated spelling") -------------------------------


def _both(work: Path, *args: str, env_extra=None, tag: str = ""):
    """Run `assay mcp tool ARGS` in one copy of the directory and `assay tool ARGS` in another."""
    import shutil

    results = []
    for prefix, name in ((("mcp", "tool"), "a" + tag), (("tool",), "b" + tag)):
        d = work / name
        shutil.copytree(work / "base", d, symlinks=True)
        results.append((run(*prefix, *args, cwd=d, env_extra=env_extra), d))
    return results


def _tree(d: Path) -> dict[str, tuple[bytes, int]]:
    out = {}
    for root, _, files in os.walk(d):
        for f in files:
            p = Path(root) / f
            out[str(p.relative_to(d))] = (p.read_bytes(), stat.S_IMODE(p.stat().st_mode))
    return out


@pytest.fixture
def shim_base(work):
    base = work / "base"
    base.mkdir()
    for name in ("keys", "other"):
        (base / name).mkdir()
        for f in ("private_key.pem", "public_key.pem"):
            (base / name / f).write_bytes((work / name / f).read_bytes())
            (base / name / f).chmod(0o600 if f.startswith("private") else 0o644)
    (base / "tool.json").write_bytes((work / "tool.json").read_bytes())
    env = {"SOURCE_DATE_EPOCH": "1769601600"}
    assert (
        run(
            "mcp",
            "tool",
            "sign",
            "tool.json",
            "-k",
            "keys/private_key.pem",
            "-o",
            "signed.json",
            cwd=base,
            env_extra=env,
        ).returncode
        == 0
    )
    doc = json.loads((base / "signed.json").read_bytes())
    doc["description"] = "tampered"
    (base / "tampered.json").write_text(json.dumps(doc))
    (base / "trust.yaml").write_text("require_signed: true\ntrusted_key_ids: []\n")
    return work


@pytest.mark.parametrize(
    "args",
    [
        ("sign", "tool.json", "-k", "keys/private_key.pem", "-o", "out.json"),
        ("sign", "tool.json", "-k", "keys/private_key.pem", "--in-place", "--embed-pubkey"),
        ("sign", "tool.json", "-k", "keys/private_key.pem"),
        ("sign", "nope.json", "-k", "keys/private_key.pem", "-o", "x.json"),
        ("verify", "signed.json", "--pubkey", "keys/public_key.pem"),
        ("verify", "signed.json", "--pubkey", "other/public_key.pem"),
        ("verify", "tampered.json", "--pubkey", "keys/public_key.pem"),
        ("verify", "signed.json", "--trust-policy", "trust.yaml"),
        ("verify", "tool.json", "--trust-policy", "trust.yaml"),
        ("verify", "tool.json", "--pubkey", "keys/public_key.pem"),
        ("verify", "signed.json"),
        ("verify", "tampered.json", "--pubkey", "keys/public_key.pem", "-q"),
    ],
)
def test_shim_is_byte_identical_apart_from_the_warning(shim_base, args):
    (mcp, da), (shim, db) = _both(shim_base, *args, env_extra={"SOURCE_DATE_EPOCH": "1769601600"})
    assert shim.returncode == mcp.returncode
    assert shim.stdout == mcp.stdout
    # the warning comes first on every use, a usage error included (docs/tool-signing.md,
    # "Deprecated spelling")
    assert shim.stderr == WARNING + mcp.stderr
    assert _tree(da) == _tree(db)


def test_shim_keygen_same_layout_and_output_shape(shim_base):
    (mcp, da), (shim, db) = _both(shim_base, "keygen", "--out", "new")
    assert mcp.returncode == shim.returncode == 0
    assert shim.stderr == WARNING and mcp.stderr == b""
    mask = lambda b: re.sub(rb"sha256:[0-9a-f]{64}", b"KEYID", b)  # noqa: E731 - fresh random keys
    assert mask(shim.stdout) == mask(mcp.stdout)
    for d in (da, db):
        assert stat.S_IMODE((d / "new/private_key.pem").stat().st_mode) == 0o600
    assert sorted(_tree(da)) == sorted(_tree(db))
    (mcp, _), (shim, _) = _both(shim_base, "keygen", "--out", "keys", tag="2")
    assert (mcp.returncode, shim.returncode) == (1, 1)
    assert shim.stderr == WARNING + mcp.stderr


def test_shim_is_hidden_and_warns_on_usage_errors_and_help(tmp_path):
    """The deprecation line comes first on every use of the shim: a usage error (cyclopts' own
    or the command's) and its help too, with stdout and exit status those of `assay mcp tool`."""
    res = run("--help", cwd=tmp_path)
    assert b" mcp " in res.stdout and b" tool " not in res.stdout
    res = run("mcp", "--help", cwd=tmp_path)
    assert b" tool " in res.stdout
    for args in (
        ("verify",),
        ("sign", "t.json", "-k", "k", "-o", "x", "--in-place"),
        ("bogus",),
        ("sign", "t.json", "--key", "k"),
    ):
        shim, mcp = run("tool", *args, cwd=tmp_path), run("mcp", "tool", *args, cwd=tmp_path)
        assert (shim.returncode, shim.stdout) == (mcp.returncode, mcp.stdout) == (2, b""), args
        # cyclopts names the command as typed ("tool verify" against "mcp tool verify")
        assert shim.stderr == WARNING + mcp.stderr.replace(b'"mcp tool', b'"tool'), args
        assert WARNING not in mcp.stderr
    res = run("tool", "verify", "--help", cwd=tmp_path)
    assert res.returncode == 0 and res.stderr == WARNING
    assert res.stdout.startswith(b"Usage: assay tool verify ")
