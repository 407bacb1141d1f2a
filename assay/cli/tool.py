"""`assay mcp tool keygen|sign|verify` (docs/tool-signing.md) and the hidden deprecated
`assay tool ...` shim.

Usage errors (a missing or conflicting flag) print ``assay: error: <message>`` and exit 2, like
every command. Errors of the work itself print ``error: <message>`` on one line; keygen and sign
then exit 1, verify exits 0-4 as documented in :mod:`assay.signing`. The shim runs the very same code
after one deprecation line on stderr (printed by :func:`assay.cli.app.main` before parsing), so
stdout, exit codes and files are identical.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import cyclopts
from cyclopts import Parameter

from assay.cli.errors import UsageError, one_line

SHIM_WARNING = "warning: `assay tool` is deprecated; use `assay mcp tool` instead\n"

_EMBEDDED_WARNING = (
    "WARNING: Using embedded public key from signature.\n"
    "         This provides NO security guarantee - anyone can sign and embed their own key!\n"
    "         Use --pubkey or --trust-policy for production verification.\n"
    "\n"
)


def _error(exc: BaseException | str) -> None:
    sys.stderr.write(f"error: {one_line(exc)}\n")


def _read_tool_definition(tool: str) -> object:
    """The tool file's JSON; sign and verify report a failed read or parse in the same words."""
    from assay import signing

    data = signing.read_tool_file(tool)
    try:
        return signing.parse_tool_json(data)
    except signing.SigningError as exc:
        raise signing.SigningError(f"failed to parse tool JSON: {tool}: {exc}") from None


def run_keygen(out: str, force: bool) -> int:
    from assay import signing
    from assay.manifest.publish import PublishError, publish_new, publish_replace

    try:
        if not os.path.isdir(out):
            try:
                os.makedirs(out, exist_ok=True)
            except OSError as exc:
                raise signing.SigningError(f"failed to create directory: {out}: {exc.strerror or exc}") from None
        private_path = os.path.join(out, "private_key.pem")
        public_path = os.path.join(out, "public_key.pem")
        if not force:
            if os.path.lexists(private_path):
                raise signing.SigningError(f"private key already exists: {private_path} (use --force to overwrite)")
            if os.path.lexists(public_path):
                raise signing.SigningError(f"public key already exists: {public_path} (use --force to overwrite)")
        key = signing.generate_key()
        private_pem = signing.private_key_pem(key)
        public_pem = signing.public_key_pem(key.public_key())
        try:
            if force:
                # A fresh 0600 file renamed over the old name: never written through a link,
                # never left with an old, wider mode.
                publish_replace(private_path, private_pem, mode=0o600)
                publish_replace(public_path, public_pem, mode=0o644)
            else:
                publish_new(private_path, private_pem, mode=0o600)
                try:
                    publish_new(public_path, public_pem, mode=0o644)
                except PublishError:
                    os.unlink(private_path)  # do not leave half a key pair behind
                    raise
        except PublishError as exc:
            raise signing.SigningError(str(exc)) from None
    except signing.SigningError as exc:
        _error(exc)
        return 1
    sys.stdout.write(
        "Generated ed25519 keypair:\n"
        f"  Private key: {private_path} (PKCS#8 PEM, mode 0600)\n"
        f"  Public key:  {public_path} (SPKI PEM)\n"
        "\n"
        f"key_id: {signing.key_id(key.public_key())}\n"
        "\n"
        "Add this key_id to your trust policy to trust signatures from this key.\n"
    )
    return 0


def run_sign(tool: str, key: str, out: str | None, in_place: bool, embed_pubkey: bool) -> int:
    from assay import signing
    from assay.manifest.publish import PublishError, publish_replace

    try:
        if in_place:
            output = tool
        elif out is not None:
            output = out
        else:  # the command refuses this as a usage error before calling here
            raise signing.SigningError("must specify --out <PATH> or --in-place")
        private = signing.load_private_key_file(key, warn=lambda line: sys.stderr.write(line + "\n"))
        definition = _read_tool_definition(tool)
        when, warning = signing.signed_at_from_environment()
        if warning:
            sys.stderr.write(warning + "\n")
        signed = signing.sign_tool(definition, private, embed_pubkey=embed_pubkey, signed_at=when)
        try:
            publish_replace(output, signing.render_tool(signed))
        except PublishError as exc:
            raise signing.SigningError(f"failed to write output: {exc}") from None
    except signing.SigningError as exc:
        _error(exc)
        return 1
    sig = signed[signing.SIG_FIELD]
    lines = [
        "Signed tool definition:",
        f"  Input:  {tool}",
        f"  Output: {output}",
        "",
        "Signature:",
        f"  key_id:         {sig['key_id']}",
        f"  payload_digest: {sig['payload_digest']}",
        f"  signed_at:      {sig['signed_at']}",
    ]
    if "public_key" in sig:
        lines.append("  public_key:     (embedded)")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def run_verify(
    tool: str,
    pubkey: str | None,
    trust_policy: str | None,
    allow_embedded_key: bool,
    quiet: bool,
) -> int:
    from assay import signing

    def say(text: str) -> None:
        if not quiet:
            sys.stdout.write(text)

    try:
        definition = _read_tool_definition(tool)
        if not isinstance(definition, dict):
            raise signing.SigningError(f"tool definition must be a JSON object: {tool}")
        policy = signing.load_trust_policy_file(trust_policy) if trust_policy is not None else None
        if not signing.is_signed(definition):
            if policy is not None and policy.require_signed:
                raise signing.VerifyError.no_signature()
            say("Tool is not signed (no x-assay-sig field)\n")
            return 0
        if pubkey is not None:
            public = signing.load_public_key_file(pubkey)
        elif policy is not None:
            sig = signing.parse_signature(definition[signing.SIG_FIELD])
            public = signing.key_from_trust_policy(policy, sig)
        elif allow_embedded_key:
            if not quiet:
                sys.stderr.write(_EMBEDDED_WARNING)
            sig = signing.parse_signature(definition[signing.SIG_FIELD])
            public = signing.embedded_public_key(sig)
        else:
            raise signing.SigningError("must specify --pubkey, --trust-policy, or --allow-embedded-key")
        result = signing.verify_tool(definition, public)
    except signing.SigningError as exc:
        if not quiet:
            _error(exc)
        return exc.exit_code
    say(f"Verification successful!\n\n  key_id:    {result.key_id}\n  signed_at: {result.signed_at}\n")
    return 0


def _register_tool_commands(target: cyclopts.App) -> None:
    """The three commands, registered on `assay mcp tool` and on the hidden `assay tool` shim
    (whose warning :func:`assay.cli.app.main` prints first: docs/tool-signing.md, "Deprecated
    spelling")."""

    @target.command(name="keygen")
    def keygen_command(
        *,
        out: Annotated[str, Parameter(name="--out")] = ".",
        force: Annotated[bool, Parameter(name=["--force", "-f"], negative=())] = False,
    ) -> int:
        """Generate an Ed25519 key pair for signing tool definitions.

        Parameters
        ----------
        out
            Directory for private_key.pem (mode 0600) and public_key.pem; created if missing.
        force
            Replace existing key files.
        """
        return run_keygen(out, force)

    @target.command(name="sign")
    def sign_command(
        tool: Annotated[str, Parameter(name="TOOL")],
        /,
        *,
        key: Annotated[str, Parameter(name=["--key", "-k"])],
        out: Annotated[str | None, Parameter(name=["--out", "-o"])] = None,
        in_place: Annotated[bool, Parameter(name="--in-place", negative=())] = False,
        embed_pubkey: Annotated[bool, Parameter(name="--embed-pubkey", negative=())] = False,
    ) -> int:
        """Sign a tool definition (JSON); the signature goes into its x-assay-sig member.

        Parameters
        ----------
        tool
            Tool definition file (a JSON object).
        key
            Private key file (PKCS#8 PEM).
        out
            Where to write the signed definition.
        in_place
            Replace the input file with the signed definition.
        embed_pubkey
            Put the public key into the signature (testing only: it proves nothing).
        """
        if out is not None and in_place:
            raise UsageError("--out and --in-place cannot be used together")
        if out is None and not in_place:
            raise UsageError("must specify --out <PATH> or --in-place")
        return run_sign(tool, key, out, in_place, embed_pubkey)

    @target.command(name="verify")
    def verify_command(
        tool: Annotated[str, Parameter(name="TOOL")],
        /,
        *,
        pubkey: Annotated[str | None, Parameter(name="--pubkey")] = None,
        trust_policy: Annotated[str | None, Parameter(name="--trust-policy")] = None,
        allow_embedded_key: Annotated[bool, Parameter(name="--allow-embedded-key", negative=())] = False,
        quiet: Annotated[bool, Parameter(name=["--quiet", "-q"], negative=())] = False,
    ) -> int:
        """Verify a signed tool definition.

        Exit codes: 0 valid (or unsigned and not required), 1 malformed signature or other error,
        2 unsigned but the trust policy requires signatures, 3 key not trusted, 4 invalid
        signature (content changed, wrong key, payload type or key id mismatch).

        Parameters
        ----------
        tool
            Signed tool definition file (JSON).
        pubkey
            Public key file (SPKI PEM) to verify with.
        trust_policy
            Trust policy file (YAML): require_signed, trusted_key_ids, trusted_keys.
        allow_embedded_key
            Verify with the key embedded in the signature (testing only: it proves nothing).
        quiet
            Print nothing; only the exit code tells.
        """
        if pubkey is not None and trust_policy is not None:
            raise UsageError("--pubkey and --trust-policy cannot be used together")
        return run_verify(tool, pubkey, trust_policy, allow_embedded_key, quiet)


def register(app: cyclopts.App, mcp: cyclopts.App) -> None:
    tool = cyclopts.App(name="tool", help="Sign and verify MCP tool definitions.", help_format="plaintext")
    mcp.command(tool)
    _register_tool_commands(tool)

    shim = cyclopts.App(
        name="tool",
        help="Deprecated: use `assay mcp tool`.",
        help_format="plaintext",
        show=False,
    )
    app.command(shim)
    _register_tool_commands(shim)
