"""Loader rules (docs/policy.md, "Loading", "YAML budget"): error classes, one-line
messages naming the file, YAML 1.2 scalars, duplicate keys, alias bombs, legacy normalization."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.policy import PolicyError, check_schemas, evaluate, load_policy, schema_errors
from assay.policy.loader import STRICT_V1_MESSAGE

DATA = Path(__file__).parent / "data"


def load(text: str | bytes, **kw):
    data = text.encode() if isinstance(text, str) else text
    return load_policy(data, source="pol.yaml", **kw)


def err(text: str | bytes, **kw) -> PolicyError:
    with pytest.raises(PolicyError) as info:
        load(text, **kw)
    e = info.value
    assert "\n" not in str(e)
    assert str(e).startswith("pol.yaml")
    return e


def test_L1_non_utf8_is_syntax_without_location():
    e = err(b'version: "2.0"\nname: \xff\xfe\n')
    assert e.kind == "syntax" and e.line is None and e.column is None
    assert str(e) == "pol.yaml: invalid UTF-8 at byte 21"
    assert e.server_error() == {"code": "E_POLICY_PARSE", "message": "Policy YAML is invalid"}


def test_L2_syntax_error_has_1_based_line_and_column():
    e = err('version: "2.0"\ntools:\n  allow: [read_file\n')
    assert e.kind == "syntax"
    assert e.line == 4 and e.column == 1
    assert str(e).startswith("pol.yaml:4:1: invalid YAML: ")
    assert e.server_error() == {
        "code": "E_POLICY_PARSE",
        "message": "Policy YAML is invalid",
        "details": {"line": 4, "column": 1},
    }


def test_L2_duplicate_top_level_key_is_syntax_with_position():
    e = err('version: "2.0"\ntools: {}\ntools: {}\n')
    assert e.kind == "syntax" and (e.line, e.column) == (3, 1)
    assert "duplicate key 'tools'" in str(e)


def test_L2_duplicate_nested_key_is_refused_at_any_depth():
    e = err("schemas:\n  t:\n    properties:\n      a: {type: string, type: integer}\n")
    assert e.kind == "syntax" and (e.line, e.column) == (4, 25)


def test_L2_yaml12_booleans_yes_no_on_off_stay_strings():
    p = load('version: "2.0"\ntools:\n  allow: [yes, no, on, off, y, n]\n')
    assert p.tools.allow == ("yes", "no", "on", "off", "y", "n")
    assert evaluate(p, "yes", None).outcome == "allow_with_warning"


def test_L2_yaml12_other_scalars():
    # octal-looking and sexagesimal/timestamp forms of YAML 1.1 are strings or decimal in 1.2
    p = load('version: "2.0"\nschemas:\n  t: {enum: [012, 0o17, 0x1f, 1:30, 2001-12-14, true, null]}\n')
    assert p.schemas["t"]["enum"] == [12, 15, 31, "1:30", "2001-12-14", True, None]


def test_D4a_alias_bomb_is_a_structure_error():
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(8):
        prev, cur = chr(97 + i), chr(98 + i)
        lines.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    e = err("\n".join(lines) + "\n")
    assert e.kind == "structure" and "100000 nodes" in str(e)


def test_D4a_recursive_anchor_is_a_structure_error():
    assert err("schemas: &a {t: *a}\n").kind == "structure"


def test_D4a_small_aliases_are_fine():
    p = load('version: "2.0"\ntools:\n  allow: &names [a, b]\n  approval_required: *names\n')
    assert p.tools.approval_required == ("a", "b")


@pytest.mark.parametrize("text", ["", "# only a comment\n", "- a\n- b\n", "42\n", '"x"\n', "~\n"])
def test_L3_root_not_mapping(text):
    e = err(text)
    assert e.kind == "root_not_mapping"
    assert e.server_error() == {"code": "E_POLICY_PARSE", "message": "Policy root must be a mapping"}


@pytest.mark.parametrize(
    "text, where",
    [
        ("tools: 42\n", "tools"),
        ('tools: {allow: "x"}\n', "tools.allow"),
        ("tools: {allow: [1]}\n", "tools.allow[0]"),
        ("enforcement: {unconstrained_tools: block}\n", "enforcement.unconstrained_tools"),
        ("limits: {max_requests_total: -1}\n", "limits.max_requests_total"),
        ("limits: {max_tool_calls_total: 1.5}\n", "limits.max_tool_calls_total"),
        ("limits: {max_tool_calls_total: true}\n", "limits.max_tool_calls_total"),
        ("tool_pins: {t: {server_id: s, tool_name: t, schema_hash: x}}\n", "missing field meta_hash"),
        ("version: 2.0\n", "version: expected a string, got a float (quote it)"),
        ("schemas: {t: {enum: [.nan]}}\n", "schemas.t.enum[0]"),
        ("schemas: {t: {1: x}}\n", "schemas.t"),
        ("schemas: {t: !custom x}\n", "unsupported YAML tag !custom"),
        ("tool_classes: {t: x}\n", "tool_classes.t"),
        ("constraints: 5\n", "constraints"),
        ("tools: {restrict_scope_contract: {scope_type: tool}}\n", "missing field scope_value"),
    ],
)
def test_L4_type_mismatch_is_structure(text, where):
    e = err(text)
    assert e.kind == "structure"
    assert where in str(e)
    assert e.server_error() == {"code": "E_POLICY_PARSE", "message": "Policy structure is invalid"}


def test_L5_unknown_keys_warn_with_dotted_paths_and_are_ignored():
    seen: list[str] = []
    p = load('version: "2.0"\ntools:\n  allowed: [x]\nfoo: 1\nenforcement: {mode: deny}\n', warn=seen.append)
    assert sorted(seen) == [
        "pol.yaml: unknown key ignored: enforcement.mode",
        "pol.yaml: unknown key ignored: foo",
        "pol.yaml: unknown key ignored: tools.allowed (did you mean tools.allow?)",
    ]
    assert p.tools.allow is None and not p.has_allowlist  # the misspelt allowlist is dropped (L5 note)


def test_L6_v1_deprecation_warning_and_strict_mode():
    v1 = 'constraints:\n  - tool: read_file\n    params: { path: { matches: "^/workspace/.*" } }\n'
    seen: list[str] = []
    p = load(v1, warn=seen.append)
    assert p.v1_format and any("deprecated" in w and "docs/policy.md" in w for w in seen)
    e = err(v1, strict_deprecations=True)
    assert e.kind == "structure" and e.detail.startswith(STRICT_V1_MESSAGE)
    e = err('version: "1.0"\n', strict_deprecations=True)  # version "1.0" alone is v1 too
    assert e.detail == STRICT_V1_MESSAGE


def test_L7_legacy_root_allow_deny_merge_after_tools_lists():
    p = load("tools: {allow: [a], deny: [x]}\nallow: [b]\ndeny: [y]\n")
    assert p.tools.allow == ("a", "b") and p.tools.deny == ("x", "y")
    assert p.to_dict()["allow"] is None and p.to_dict()["deny"] is None
    p = load("allow: [b]\n")
    assert p.tools.allow == ("b",) and p.has_allowlist


def test_L8_M1_list_form_constraints_migrate_to_schema():
    p = load(
        'constraints:\n  - tool: read_file\n    params:\n      path: { matches: "^/workspace/.*" }\n'
        "      mode: { deny_patterns: [x] }\n      a: { matches: b }\n"
    )
    assert p.version == "2.0"
    assert p.schemas["read_file"] == {
        "type": "object",
        "additionalProperties": True,
        "properties": {
            "a": {"type": "string", "pattern": "b", "minLength": 1},
            "path": {"type": "string", "pattern": "^/workspace/.*", "minLength": 1},
        },
        "required": ["a", "path"],
    }
    assert list(p.schemas["read_file"]["properties"]) == ["a", "path"]


def test_L8_M1_map_form_and_M2_overwrite():
    p = load(
        'version: "1.0"\nschemas:\n  read_file: {type: object, required: [zzz]}\n'
        'constraints:\n  read_file: { path: "^/workspace/.*", other: { matches: "^x$" } }\n'
    )
    assert p.version == "2.0"
    assert p.schemas["read_file"]["required"] == ["other", "path"]  # M2: migration overwrites
    assert evaluate(p, "read_file", {"path": "/workspace/a", "other": "x", "extra": 1}).outcome == "allow"
    assert evaluate(p, "read_file", {"path": "/etc"}).reason_code == "E_ARG_SCHEMA"


def test_L8_version_kept_when_not_blank_or_1_0():
    assert load('version: "3"\nconstraints: {t: {p: x}}\n').version == "3"


def test_L9a_pin_hashes_must_be_64_lowercase_hex_sorted_names():
    good = "a" * 64
    text = (
        "tool_pins:\n"
        f"  zeta: {{server_id: s, tool_name: zeta, schema_hash: {good}, meta_hash: {good}}}\n"
        f"  beta: {{server_id: s, tool_name: beta, schema_hash: {good}, meta_hash: {'A' * 64}}}\n"
        f"  alpha: {{server_id: s, tool_name: alpha, schema_hash: {'a' * 63}, meta_hash: {good}}}\n"
    )
    e = err(text)
    assert e.kind == "validation"
    assert str(e) == "pol.yaml: tool_pins.alpha.schema_hash must be exactly 64 lowercase hexadecimal characters"
    assert e.server_error()["message"] == "Policy structure is invalid"


def test_L9b_kill_switch_trigger_must_name_a_monitor_rule():
    text = (
        "runtime_monitor:\n  rules:\n    - {id: r1, type: file_open, match: {path_globs: ['/etc/*']}}\n"
        "kill_switch:\n  triggers:\n    - {on_rule: r2}\n"
    )
    e = err(text)
    assert e.kind == "validation" and str(e) == "pol.yaml: kill_switch.triggers references unknown rule id: r2"
    ok = load(text.replace("r2", "r1"))
    assert ok.kill_switch["grace_period_ms"] == 3000 and ok.runtime_monitor["rules"][0]["severity"] == "medium"


def test_L10_schemas_are_not_compiled_at_load():
    p = load("schemas:\n  bad: {type: bogus}\n  good: {type: object}\n")
    assert check_schemas(p) is not None and check_schemas(p).startswith("tool 'bad': ")
    assert list(schema_errors(p)) == ["bad"]


def test_spec_example_policies_load():
    for name in ("minimal.yaml", "complete.yaml"):
        p = load_policy((DATA / name).read_bytes(), source=name)
        assert p.version == "2.0"


def test_D31c_check_descriptions_warns_no_effect():
    seen: list[str] = []
    load("signatures: {check_descriptions: true}\n", warn=seen.append)
    assert seen and "no effect" in seen[0]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_arbitrary_bytes_raise_only_policy_error(data):
    try:
        load_policy(data)
    except PolicyError as e:
        assert "\n" not in str(e)


_yaml_text = st.text(alphabet=st.sampled_from(list("ab:- []{}\n\"'&*!#,?|>0.1~yes")), max_size=200)


@settings(max_examples=400, deadline=None)
@given(_yaml_text)
def test_arbitrary_yamlish_text_raises_only_policy_error(text):
    try:
        load_policy(text.encode())
    except PolicyError as e:
        assert e.kind in ("syntax", "root_not_mapping", "structure", "validation")


@pytest.mark.parametrize("ref", ["https://example.com/s.json", "file:///etc/schema.json", "other.json#/x"])
def test_a_ref_that_is_never_fetched_warns_at_load(ref):
    """It used to load silently and fail only at call time (E_SCHEMA_COMPILE)."""
    seen: list[str] = []
    text = (
        'version: "2.0"\nschemas:\n'
        f'  read_file: {{type: object, properties: {{path: {{$ref: "{ref}"}}, n: {{$ref: "#/$defs/n"}}}}, '
        "$defs: {n: {type: integer}}}\n"
    )
    p = load(text, warn=seen.append)
    expected = (
        "schemas.read_file.properties.path.$ref: remote, file: and relative references are never "
        "fetched, so this schema will not compile and calls it covers are denied (E_SCHEMA_COMPILE)"
    )
    assert p.warnings == (expected,)
    assert seen == [f"pol.yaml: {expected}"]
    assert evaluate(p, "read_file", {"path": "x"}).reason_code == "E_SCHEMA_COMPILE"


def test_local_refs_do_not_warn():
    p = load('version: "2.0"\nschemas:\n  $defs: {p: {type: string}}\n  t: {properties: {a: {$ref: "#/$defs/p"}}}\n')
    assert p.warnings == ()


def test_model_imports_neither_loader_nor_engine():
    """The types module is a leaf of the package: no import cycle between engine and model (the
    model used to build the engine's compiled form in Policy.__post_init__)."""
    import ast

    import assay.policy.model as model

    tree = ast.parse(Path(model.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not {m for m in imported if m and m.startswith("assay.policy")}, imported


def test_schema_patterns_that_can_take_seconds_are_warned_at_load():
    """A schema regex with lookaround or a backreference runs on a backtracking engine; unless it
    is anchored with ^ it can take seconds on a long argument (docs/policy.md, "Schemas"). The
    policy still loads, and says so; linear and anchored patterns say nothing."""
    import time

    import jsonschema_rs

    p = load(
        (
            'version: "2.0"\ntools: {allow: [a]}\nschemas:\n  a:\n    type: object\n    properties:\n'
            '      q: {type: string, pattern: "(?!x).*token"}\n'
            '      r: {type: string, pattern: "^(?!\\\\.\\\\.).*$"}\n'
            '      s: {type: string, pattern: ".*token"}\n'
            '      pattern: {type: string, pattern: "(a)\\\\1"}\n'
            '    patternProperties:\n      "(?<=x)y": {type: string}\n'
        )
    )
    tail = "uses lookaround or a backreference and is not anchored with ^: checking a long argument can take seconds while every frame waits"
    assert list(p.warnings) == [
        f'schemas.a.patternProperties: "(?<=x)y" {tail}',
        f'schemas.a.properties.pattern.pattern: "(a)\\\\1" {tail}',
        f'schemas.a.properties.q.pattern: "(?!x).*token" {tail}',
    ]
    # what the warning is about: the unanchored one is slow, the anchored one is not
    slow = jsonschema_rs.validator_for({"type": "string", "pattern": "(?!x).*token"})
    quick = jsonschema_rs.validator_for({"type": "string", "pattern": "^(?!\\.\\.).*$"})
    started = time.process_time()
    quick.is_valid("y" * 20_000)
    fast = time.process_time() - started
    started = time.process_time()
    slow.is_valid("y" * 20_000)
    assert time.process_time() - started > 10 * fast
