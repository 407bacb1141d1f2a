"""Argument schemas: preparation and compilation (docs/policy.md, "Schemas").

Compilation uses ``jsonschema_rs`` (Draft 2020-12 unless ``$schema`` says otherwise), with a
retriever that refuses every remote or file reference, so a schema can never make the guard
fetch anything. Its regex engine anchors ``$`` at the very end of the string (the rule of
docs/policy.md, "Schemas" holds without rewriting patterns; a regression test pins it).
``jsonschema_rs`` is imported on the first compilation: a policy without schemas never loads
it (start-up time of `assay mcp wrap`).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["prepare_tool_schema", "compile_schema", "CompiledSchema", "RETRIEVAL_DISABLED"]

RETRIEVAL_DISABLED = "external JSON Schema retrieval is disabled"


class _RetrievalRefused(Exception):
    pass


def _refuse(uri: str) -> Any:
    raise _RetrievalRefused(RETRIEVAL_DISABLED)


class SchemaPrepError(Exception):
    """Preparation or compilation failed; ``str(e)`` is the upstream-style message."""


def _shared_defs(schemas: dict[str, Any]) -> dict[str, Any] | None:
    if "$defs" not in schemas:
        return None
    shared = schemas["$defs"]
    if not isinstance(shared, dict):
        raise SchemaPrepError("shared $defs must be a mapping")
    return shared


def prepare_tool_schema(schemas: dict[str, Any], tool: str) -> Any:
    """The tool's schema with shared ``$defs`` merged in; raises :class:`SchemaPrepError`."""
    shared = _shared_defs(schemas)
    schema = schemas[tool]
    if shared is None:
        return schema
    if isinstance(schema, dict):
        local = schema.get("$defs", None) if "$defs" in schema else None
        if "$defs" not in schema:
            merged = dict(schema)
            merged["$defs"] = dict(shared)
            return merged
        if not isinstance(local, dict):
            raise SchemaPrepError("tool-local $defs must be a mapping")
        for name in shared:
            if name in local:
                raise SchemaPrepError("shared and tool-local $defs entries must not overlap")
        merged = dict(schema)
        merged["$defs"] = {**local, **shared}
        return merged
    if isinstance(schema, bool):
        try:
            compile_schema({"$defs": shared})
        except SchemaPrepError as exc:
            raise SchemaPrepError(f"shared $defs failed to compile: {exc}") from None
    return schema


def compile_schema(schema: Any) -> Any:
    """A jsonschema_rs validator, or :class:`SchemaPrepError` with a one-line message."""
    if not isinstance(schema, (dict, bool)):
        raise SchemaPrepError(f'{json.dumps(schema, ensure_ascii=False)} is not of types "boolean", "object"')
    import jsonschema_rs

    try:
        return jsonschema_rs.validator_for(schema, retriever=_refuse)
    except jsonschema_rs.ValidationError as exc:
        message = exc.message
    except Exception as exc:  # noqa: BLE001 - any failure to build is a compile failure (fail closed)
        message = str(exc)
    message = message.replace(f"failed: {_RetrievalRefused.__name__}: ", "failed: ")
    message = " ".join(message.split())
    raise SchemaPrepError(message or "schema failed to compile")


def _pointer(path: list[Any]) -> str:
    if not path:
        return ""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


class CompiledSchema:
    """One compiled tool schema: a fast validity test and the violation list on failure."""

    __slots__ = ("is_valid", "_validator")

    def __init__(self, validator: Any) -> None:
        self._validator = validator
        self.is_valid = validator.is_valid

    def violations(self, instance: Any) -> list[dict[str, str]]:
        """``[{path, message}]`` in validator order (path = JSON Pointer of the instance)."""
        return [
            {"path": _pointer(err.instance_path), "message": err.message}
            for err in self._validator.iter_errors(instance)
        ]
