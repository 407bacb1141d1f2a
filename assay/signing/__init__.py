"""Ed25519 signatures over MCP tool definitions (docs/tool-signing.md).

What is signed: the JCS bytes (RFC 8785) of the tool object with its ``x-assay-sig`` member
removed -- every other member, vendor keys included -- wrapped in the DSSE pre-authentication
encoding with payload type ``application/vnd.assay.tool+json;v=1``. Binding the payload type into
the signed bytes means a signature made for some other kind of document can never verify as a
tool signature. The signature object lives in the tool's own top-level ``x-assay-sig`` member, so
a signed tool is still a plain tool definition.

What a signature does not do: nothing at runtime checks it (wrap and the policy engine ignore
``x-assay-sig``; runtime integrity is ``tool_pins``), ``signed_at`` is not signed, and a valid
signature says who signed these bytes, not that the tool is safe.

Trust: with ``--pubkey`` the given key is the trusted key. A trust policy trusts exactly the
key ids it lists; a policy listing none trusts no key (upstream trusted every key then).

One job a module: :mod:`~assay.signing.model` (constants, errors, the signature object),
:mod:`~assay.signing.keys` (Ed25519 keys and key ids), :mod:`~assay.signing.signature` (the
signed bytes, sign and verify), :mod:`~assay.signing.trust` (the trust policy), all sans-IO;
:mod:`~assay.signing.files` reads the small files (keys, trust policies, tool definitions)
through :func:`assay.inputs.read_input`.
"""

from __future__ import annotations

from assay.signing.files import (
    key_from_trust_policy,
    load_private_key_file,
    load_public_key_file,
    load_trust_policy_file,
    private_key_mode_warning,
    read_tool_file,
    signed_at_from_environment,
)
from assay.signing.keys import (  # noqa: F401  (_sha256_digest: tests)
    _sha256_digest,
    generate_key,
    key_id,
    load_private_key_pem,
    load_public_key_pem,
    private_key_pem,
    public_key_pem,
)
from assay.signing.model import (
    PAYLOAD_TYPE,
    SIG_FIELD,
    InexactNumberError,
    SigningError,
    ToolSignature,
    VerifyError,
    VerifyResult,
)
from assay.signing.signature import (
    canonical_payload,
    embedded_public_key,
    format_timestamp,
    is_signed,
    pae,
    parse_signature,
    parse_tool_json,
    render_tool,
    sign_tool,
    verify_tool,
)
from assay.signing.trust import TrustedKey, TrustPolicy, parse_trust_policy

__all__ = [
    "PAYLOAD_TYPE",
    "SIG_FIELD",
    "SigningError",
    "VerifyError",
    "ToolSignature",
    "VerifyResult",
    "TrustedKey",
    "TrustPolicy",
    "pae",
    "canonical_payload",
    "key_id",
    "generate_key",
    "private_key_pem",
    "public_key_pem",
    "load_private_key_pem",
    "load_public_key_pem",
    "parse_tool_json",
    "is_signed",
    "parse_signature",
    "sign_tool",
    "verify_tool",
    "format_timestamp",
    "render_tool",
    "parse_trust_policy",
    "load_private_key_file",
    "load_public_key_file",
    "load_trust_policy_file",
    "read_tool_file",
    "InexactNumberError",
    "private_key_mode_warning",
    "embedded_public_key",
    "key_from_trust_policy",
    "signed_at_from_environment",
]
