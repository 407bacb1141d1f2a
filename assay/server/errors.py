"""Tool error payloads and the fixed fail-closed results (docs/server.md, "Error catalogue")."""

from __future__ import annotations

from typing import Any

__all__ = [
    "ToolError",
    "error_payload",
    "truncate_message",
    "INTERNAL_PAYLOAD",
    "TIMEOUT_PAYLOAD",
    "MSG_YAML_INVALID",
    "MSG_ROOT_NOT_MAPPING",
    "MSG_STRUCTURE_INVALID",
]

MSG_YAML_INVALID = "Policy YAML is invalid"
MSG_ROOT_NOT_MAPPING = "Policy root must be a mapping"
MSG_STRUCTURE_INVALID = "Policy structure is invalid"

_MAX_MESSAGE_BYTES = 4096


def truncate_message(message: str) -> str:
    """Longest valid UTF-8 prefix of at most 4096 bytes, no ellipsis."""
    data = message.encode("utf-8", "replace")
    if len(data) <= _MAX_MESSAGE_BYTES:
        return data.decode("utf-8")
    return data[:_MAX_MESSAGE_BYTES].decode("utf-8", "ignore")


def error_payload(code: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """`{"allowed":false,"error":{"code","message"[,"details"]}}`."""
    err: dict[str, Any] = {"code": code, "message": truncate_message(message)}
    if details is not None:
        err["details"] = details
    return {"allowed": False, "error": err}


class ToolError(Exception):
    """An error a tool handles itself: it keeps its own code (it is not turned into E_INTERNAL)."""

    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(code)
        self.code = code
        self.message = message
        self.details = details

    def payload(self) -> dict[str, Any]:
        return error_payload(self.code, self.message, self.details)


def INTERNAL_PAYLOAD() -> dict[str, Any]:  # noqa: N802 - a constant, built fresh so nobody mutates it
    return {"allowed": False, "error": {"code": "E_INTERNAL", "message": "Tool execution failed"}}


def TIMEOUT_PAYLOAD() -> dict[str, Any]:  # noqa: N802
    return {"allowed": False, "error": {"code": "E_TIMEOUT", "message": "Tool execution timed out"}}
