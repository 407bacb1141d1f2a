"""YAML 1.2 reading for policy files (docs/policy.md, 'Loading').

PyYAML resolves scalars the YAML 1.1 way (``yes`` is a boolean, ``012`` is octal, ``1:30`` is
sexagesimal, dates become timestamps) and silently keeps the last of two duplicate keys. Upstream
reads with serde_yaml (YAML 1.2 scalars, duplicates refused), so this module swaps in a core-schema
resolver, refuses duplicates at every depth and budgets alias expansion (nodes and scalar
characters, as if every alias were copied) before anything is constructed or walks the document. The C parser is used when PyYAML has it; the resolver and constructor are ours either way.
"""

from __future__ import annotations

import math
import re
from typing import Any, ClassVar

import yaml
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.resolver import BaseResolver

from assay.inputs import DEFAULT_POLICY_BYTES
from assay.policy.reader import type_name as type_name  # (re-exported: it names what this module reads)

__all__ = [
    "type_name",
    "MAX_NODES",
    "EXPANSION_FACTOR",
    "DEFAULT_BYTE_CEILING",
    "YamlSyntaxError",
    "YamlStructureError",
    "expansion_budget",
    "parse_yaml",
]

MAX_NODES = 100_000  # expanded node count above which a document is refused
# Scalar characters after alias expansion, as a multiple of the byte ceiling of the file
# (policies: ASSAY_MCP_MAX_POLICY_BYTES, default 1,000,000). At 4x a refused or accepted policy
# stays far below 100 MB of peak memory even when every byte is a large string many times aliased.
EXPANSION_FACTOR = 4
DEFAULT_BYTE_CEILING = DEFAULT_POLICY_BYTES  # the policy ceiling (assay.inputs), budgets derive from it

try:  # the C parser when present
    from yaml.cyaml import CParser as _Parser  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the PyYAML build
    from yaml.composer import Composer
    from yaml.parser import Parser
    from yaml.reader import Reader
    from yaml.scanner import Scanner

    class _Parser(Reader, Scanner, Parser, Composer):  # type: ignore[no-redef]
        def __init__(self, stream: Any) -> None:
            Reader.__init__(self, stream)
            Scanner.__init__(self)
            Parser.__init__(self)
            Composer.__init__(self)


class YamlSyntaxError(Exception):
    """Unparsable YAML; ``line``/``column`` are 1-based or None."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None) -> None:
        super().__init__(message)
        self.line = line
        self.column = column


class YamlStructureError(Exception):
    """Well-formed YAML that cannot be a policy value (too many nodes, unsupported tag, ...)."""


STR, INT, FLOAT, BOOL, NULL = (
    "tag:yaml.org,2002:str",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:null",
)
SEQ, MAP = "tag:yaml.org,2002:seq", "tag:yaml.org,2002:map"


class _CoreResolver(BaseResolver):
    """YAML 1.2 core schema: only these plain scalars are not strings."""

    yaml_implicit_resolvers: dict[Any, Any] = {}


for _tag, _regex, _first in (
    (BOOL, r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    (NULL, r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    (INT, r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
    (
        FLOAT,
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        "-+0123456789.",
    ),
):
    _CoreResolver.add_implicit_resolver(_tag, re.compile(_regex), list(_first))


def _int(text: str) -> int:
    sign = 1
    body = text
    if body[:1] in "+-":
        sign = -1 if body[0] == "-" else 1
        body = body[1:]
    if body.startswith("0o"):
        return sign * int(body[2:], 8)
    if body.startswith("0x"):
        return sign * int(body[2:], 16)
    if not body.isdigit() or not body.isascii():
        raise ValueError(f"invalid integer {text!r}")
    return sign * int(body, 10)


def _float(text: str) -> float:
    low = text.lower()
    if low in (".inf", "+.inf"):
        return math.inf
    if low == "-.inf":
        return -math.inf
    if low == ".nan":
        return math.nan
    if "_" in text:
        raise ValueError(f"invalid float {text!r}")
    return float(text)


class _Constructor(SafeConstructor):
    """Core-schema values; duplicate keys refused; unknown tags refused."""

    yaml_constructors: ClassVar[dict[str | None, Any]] = {}

    def construct_mapping(self, node: Node, deep: bool = False) -> dict[Any, Any]:
        if not isinstance(node, MappingNode):
            raise ConstructorError(None, None, "expected a mapping node", node.start_mark)
        mapping: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                hash(key)
            except TypeError:
                raise YamlStructureError("a mapping key is not a scalar") from None
            if key in mapping:
                mark = key_node.start_mark
                raise YamlSyntaxError(f"duplicate key {key!r} in a mapping", mark.line + 1, mark.column + 1)
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping

    def _map(self, node: MappingNode) -> Any:
        data: dict[Any, Any] = {}
        yield data
        data.update(self.construct_mapping(node))

    def _seq(self, node: SequenceNode) -> Any:
        data: list[Any] = []
        yield data
        data.extend(self.construct_sequence(node))

    def _str(self, node: ScalarNode) -> str:
        return self.construct_scalar(node)

    def _null(self, node: ScalarNode) -> None:
        self.construct_scalar(node)
        return None

    def _bool(self, node: ScalarNode) -> bool:
        value = self.construct_scalar(node)
        if value in ("true", "True", "TRUE"):
            return True
        if value in ("false", "False", "FALSE"):
            return False
        raise YamlStructureError(f"invalid boolean {value!r}")

    def _int(self, node: ScalarNode) -> int:
        value = self.construct_scalar(node)
        try:
            return _int(value)
        except ValueError as exc:
            raise YamlStructureError(str(exc)) from None

    def _float(self, node: ScalarNode) -> float:
        value = self.construct_scalar(node)
        try:
            return _float(value)
        except ValueError as exc:
            raise YamlStructureError(str(exc)) from None

    def _unknown(self, node: Node) -> Any:
        raise YamlStructureError(f"unsupported YAML tag {node.tag}")


# The class's own table, which ``add_constructor`` would fill (PyYAML's stubs type that method
# for PyYAML's Loader classes only); the key None catches every other tag.
_Constructor.yaml_constructors.update(
    {
        MAP: _Constructor._map,
        SEQ: _Constructor._seq,
        STR: _Constructor._str,
        NULL: _Constructor._null,
        BOOL: _Constructor._bool,
        INT: _Constructor._int,
        FLOAT: _Constructor._float,
        None: _Constructor._unknown,
    }
)


class _Loader(_Parser, _Constructor, _CoreResolver):
    def __init__(self, stream: Any) -> None:
        _Parser.__init__(self, stream)
        _Constructor.__init__(self)
        _CoreResolver.__init__(self)


def _expanded_size(root: Node, max_nodes: int, max_chars: int) -> str | None:
    """``None`` when the document with every alias expanded stays within ``max_nodes`` nodes and
    ``max_chars`` scalar characters, else which bound it passes (``"nodes"``/``"characters"``): what a walk over the constructed document (the policy digest, a schema compile)
    would visit and copy. Aliases share one node object, so sizes are memoized per node; a node
    reachable from itself (a recursive anchor) expands forever and counts as over the bound.
    """
    sizes: dict[int, tuple[int, int]] = {}
    on_path: set[int] = set()
    # iterative post-order walk: libyaml already caps nesting at 1000, but the pure-Python
    # parser does not, and recursion here would turn a deep document into a RecursionError.
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            if isinstance(node, SequenceNode):
                children = node.value
            elif isinstance(node, MappingNode):
                children = [n for pair in node.value for n in pair]
            else:
                children = []
            nodes = 1
            chars = len(node.value) if isinstance(node, ScalarNode) else 0
            for child in children:
                n, c = sizes[id(child)]
                nodes += n
                chars += c
                if nodes > max_nodes:
                    return "nodes"
                if chars > max_chars:
                    return "characters"
            sizes[key] = (nodes, chars)
            continue
        if key in sizes:
            continue
        if key in on_path:
            return "nodes"
        on_path.add(key)
        stack.append((node, True))
        if isinstance(node, SequenceNode):
            children = node.value
        elif isinstance(node, MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            continue
        for child in children:
            cid = id(child)
            if cid in on_path:
                return "nodes"
            if cid not in sizes:
                stack.append((child, False))
    nodes, chars = sizes[id(root)]
    if nodes > max_nodes:
        return "nodes"
    if chars > max_chars:
        return "characters"
    return None


def expansion_budget(text_length: int, byte_ceiling: int = DEFAULT_BYTE_CEILING) -> int:
    """Scalar characters a document may expand to: ``EXPANSION_FACTOR`` times the larger of the
    byte ceiling and the document itself, so a document without aliases always fits."""
    return EXPANSION_FACTOR * max(byte_ceiling, text_length)


def parse_yaml(
    text: str,
    *,
    max_nodes: int = MAX_NODES,
    byte_ceiling: int = DEFAULT_BYTE_CEILING,
) -> Any:
    """Parse one YAML document (an empty stream is ``None``).

    The composed node graph is measured before anything is constructed: more than ``max_nodes``
    nodes or more than :func:`expansion_budget` scalar characters once every alias is expanded
    refuses the document. Raises :class:`YamlSyntaxError` (unparsable, more than one document,
    duplicate key) or :class:`YamlStructureError` (over a budget, unsupported tag, non-scalar key).
    """
    try:
        loader = _Loader(text)
    except yaml.YAMLError as exc:
        raise YamlSyntaxError(" ".join(str(exc).split())) from None
    try:
        try:
            node = loader.get_single_node()
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            problem = exc.problem or exc.context or "invalid YAML"
            if mark is not None:
                raise YamlSyntaxError(problem, mark.line + 1, mark.column + 1) from None
            raise YamlSyntaxError(problem) from None
        except yaml.YAMLError as exc:
            raise YamlSyntaxError(str(exc)) from None
        except RecursionError:
            raise YamlSyntaxError("document nested too deeply") from None
        if node is None:
            return None
        max_chars = expansion_budget(len(text), byte_ceiling)
        over = _expanded_size(node, max_nodes, max_chars)
        if over is not None:
            bound = f"{max_nodes} nodes" if over == "nodes" else f"{max_chars} characters of scalars"
            raise YamlStructureError(
                f"document expands to more than {bound} once aliases are expanded (alias expansion refused)"
            )
        try:
            return loader.construct_document(node)
        except ConstructorError as exc:
            raise YamlStructureError(exc.problem or str(exc)) from None
        except RecursionError:
            raise YamlStructureError("document nested too deeply") from None
    finally:
        loader.dispose()
