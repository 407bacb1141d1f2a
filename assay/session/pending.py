"""Forwarded client requests still awaiting their answer (sans-IO).

wrap relays a server response only when it answers a request the client sent and wrap
forwarded (docs/wrap.md, "Dropped server responses"). A response "answers" a request when some
official client would match it to that request: the exact id; the Python SDK's form (a string
that ``int()`` reads is that integer); the TypeScript SDK's (``Number(id)``). A client may reuse
an id while the first request is in flight, so each id holds a queue of methods.
"""

from __future__ import annotations

from typing import Any

from assay.session import serverlines

__all__ = ["PendingTable", "id_key"]

Key = Any  # an int (integer ids) or ("s", text) (string ids): 1 and "1" stay apart


def id_key(value: Any) -> Key | None:
    """A hashable key for a JSON-RPC id; None for what is not an id (bools, null, objects)."""
    cls = value.__class__
    if cls is int:
        return value
    if cls is str:
        return ("s", value)
    if cls is bool:
        return None
    if isinstance(value, str):
        return ("s", str(value))
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if value.is_integer():
            return int(value)
        return ("f", value) if value == value else None
    return None


class PendingTable:
    """id key -> methods of the forwarded requests with that id, oldest first."""

    __slots__ = ("_pending", "_py_alias")

    def __init__(self) -> None:
        # each method is a string, or what waits for the answer in its place (an inspection's Watch)
        self._pending: dict[Key, list[Any]] = {}
        # string ids that the Python SDK reads as integers, indexed by that integer
        self._py_alias: dict[int, list[Key]] = {}

    def __bool__(self) -> bool:
        return bool(self._pending)

    def __len__(self) -> int:
        return len(self._pending)

    def __contains__(self, key: Key) -> bool:
        """Whether a forwarded request with exactly this id key (:func:`id_key`) is pending."""
        return key in self._pending

    def add(self, request_id: Any, method: Any) -> Key | None:
        """Register a forwarded request; returns its key (None: the id can never be answered)."""
        if request_id.__class__ is int:  # the usual id: no conversion, no alias
            methods = self._pending.get(request_id)
            if methods is None:
                self._pending[request_id] = [method]
            else:
                methods.append(method)
            return request_id
        key = id_key(request_id)
        if key is None:
            return None
        methods = self._pending.get(key)
        if methods is None:
            self._pending[key] = [method]
            if key.__class__ is tuple and key[0] == "s":
                alias = serverlines.python_id(key[1])
                if alias.__class__ is int:
                    self._py_alias.setdefault(alias, []).append(key)
        else:
            methods.append(method)
        return key

    def _find(self, request_id: Any) -> Key | None:
        pending = self._pending
        key = request_id if request_id.__class__ is int else id_key(request_id)
        if key is None or key not in pending:
            for candidate in self._equivalents(request_id):
                if candidate in pending:
                    return candidate
            return None
        return key

    def peek(self, request_id: Any) -> Any:
        """The method of the pending request :meth:`answer` would take for this response id
        (left in the table), or None."""
        key = self._find(request_id)
        return None if key is None else self._pending[key][0]

    def answer(self, request_id: Any) -> tuple[Key, Any] | None:
        """The pending request this response id answers for some official client, removed
        from the table; None when it answers nothing."""
        pending = self._pending
        methods = pending.get(request_id) if request_id.__class__ is int else None
        if methods is not None:  # the usual answer: an int id, pending as it is (no alias)
            method = methods.pop(0)
            if not methods:
                del pending[request_id]
            return request_id, method
        key = self._find(request_id)
        if key is None:
            return None
        methods = pending[key]
        method = methods.pop(0)
        if not methods:
            del pending[key]
            if key.__class__ is tuple and key[0] == "s":
                alias = serverlines.python_id(key[1])
                if alias.__class__ is int:
                    keys = self._py_alias.get(alias)
                    if keys is not None and key in keys:
                        keys.remove(key)
                        if not keys:
                            del self._py_alias[alias]
        return key, method

    def take(self, wanted: type) -> list[tuple[Any, Any]]:
        """Remove every pending request whose method is an instance of ``wanted``: ``(id,
        method)`` pairs, the id as the client sent it (its key's value)."""
        taken: list[tuple[Any, Any]] = []
        for key in list(self._pending):
            methods = self._pending[key]
            keep = [m for m in methods if not isinstance(m, wanted)]
            if len(keep) == len(methods):
                continue
            rid = key[1] if key.__class__ is tuple else key
            taken.extend((rid, m) for m in methods if isinstance(m, wanted))
            if keep:
                self._pending[key] = keep
            else:
                del self._pending[key]
                if key.__class__ is tuple and key[0] == "s":
                    alias = serverlines.python_id(key[1])
                    keys = self._py_alias.get(alias) if alias.__class__ is int else None
                    if keys is not None and key in keys:
                        keys.remove(key)
                        if not keys:
                            del self._py_alias[alias]
        return taken

    def holds(self, wanted: type) -> bool:
        """Whether some pending request's method is an instance of ``wanted``."""
        return any(isinstance(m, wanted) for methods in self._pending.values() for m in methods)

    def _equivalents(self, request_id: Any) -> list[Key]:
        """Pending keys an id answers other than its exact self, in SDK order (Python, TS)."""
        out: list[Key] = []
        py = serverlines.python_id(request_id) if request_id.__class__ is not float else None
        if py.__class__ is int:
            out.append(py)
            out.extend(self._py_alias.get(py, ()))
        number = serverlines.js_number(request_id)
        if number is not None and number == number and number not in (float("inf"), float("-inf")):
            if number.is_integer():
                out.append(int(number))
        return out
