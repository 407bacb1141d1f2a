"""The suggested policy, in memory (docs/log.md, "assay mcp policy suggest"): what it allows,
confines and asks approval for, and that replaying the observed calls against it denies none."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.logs.entries import Entry, parse_line
from assay.logs.suggest import Observed, SuggestError, directories, replay, suggest
from assay.policy import evaluate, load_policy

T = "2026-08-22T10:15:02.123456+00:00"


def call(tool: str, outcome: str = "allow", server: str = "fs", **arguments) -> Entry:
    data = {
        "tool": tool,
        "decision": "deny" if outcome == "deny" else "allow",
        "server": server,
        "session": None,
        "reason_code": "P_TOOL_DENIED" if outcome != "allow" else "P_POLICY_ALLOW",
    }
    if outcome == "would_deny":
        data["typed_decision"] = "deny"
    if arguments:
        data["arguments"] = arguments
    e = parse_line(json.dumps({"specversion": "1.0", "type": "assay.tool.decision", "time": T, "data": data}).encode())
    assert isinstance(e, Entry)
    return e


def run(calls: list[Entry], listed=(), home="/home/ann"):
    observed = Observed()
    for c in calls:
        observed.call(c)
    for data in listed:
        observed.listing(data)
    return suggest(observed, lambda: iter(calls), home=home, header=["test"])


def test_allows_what_was_used_confines_paths_and_asks_for_destructive_tools():
    calls = [
        call("read_text_file", path="/home/ann/ws/a.txt"),
        call("read_text_file", path="/home/ann/ws/src/b.py"),
        call("list_directory", path="/home/ann/ws"),
        call("move_file", "would_deny", source="/home/ann/ws/a.txt", destination="/tmp/out/a.txt"),
        call("search", query="x", limit=3),
        call("exec", "deny", command="rm -rf /"),
    ]
    listed = [
        {"tool": "move_file", "annotations": {"readOnlyHint": False}},
        {"tool": "write_file", "annotations": {"destructiveHint": True}},
        {"tool": "read_text_file", "annotations": {"readOnlyHint": True}},
    ]
    result = run(calls, listed)
    policy = load_policy(result.text.encode(), home="/home/ann")
    assert set(policy.tools.allow) == {"read_text_file", "list_directory", "move_file", "search"}
    assert policy.tools.approval_required == ("move_file",)
    rules = sorted((r.tools, r.args, r.within) for r in policy.path_confinement)
    assert rules == [
        (("list_directory", "read_text_file"), ("path",), ("/home/ann/ws",)),  # the listing's directory, for both
        (("move_file",), ("destination",), ("/tmp/out",)),
        (("move_file",), ("source",), ("/home/ann/ws",)),
    ]
    assert "~/ws" in result.text  # written for any user's home
    assert result.replayed == 5 and result.approvals == 1
    # what it never saw is denied: a write, the denied exec, a read outside the directories used
    assert evaluate(policy, "write_file", {"path": "/home/ann/ws/a.txt"}).outcome == "deny"
    assert evaluate(policy, "exec", {"command": "ls"}).outcome == "deny"
    assert evaluate(policy, "read_text_file", {"path": "/home/ann/.ssh/id_rsa"}).reason_code == "E_PATH_CONFINEMENT"
    assert '"exec": 1 denied' in result.text and '"write_file" (destructive)' in result.text


def test_a_confinement_that_would_deny_an_observed_call_is_dropped():
    calls = [call("read", path="/srv/a/x"), call("read", path="/srv/a/../b/y")]  # '..' leaves /srv/a on the way
    result = run(calls)
    assert result.replayed == 2
    policy = load_policy(result.text.encode(), home="/home/ann")
    for c in calls:
        assert evaluate(policy, c.tool, c.arguments).outcome != "deny"


def test_relative_and_odd_values_are_not_confined_and_nothing_observed_is_refused():
    calls = [call("r", path="notes.txt"), call("w", path=["/a/b", 3]), call("v", path="file:///srv/x/y")]
    result = run(calls)
    policy = load_policy(result.text.encode(), home=None)
    assert [(r.tools, r.within) for r in policy.path_confinement] == [(("v",), ("/srv/x",))]
    with pytest.raises(SuggestError):
        run([call("exec", "deny")])


def test_directories_never_widen_to_root():
    assert directories(["/etc"]) == ["/etc"]
    assert directories(["/ws", "/ws/a", "/ws/b/c"]) == ["/ws"]
    assert directories(["/a/x", "/b/y/z"]) == ["/a", "/b/y"]


paths = st.lists(st.text("ab/.", min_size=1, max_size=12).map(lambda s: "/" + s), min_size=1, max_size=8)


@settings(max_examples=150)
@given(st.lists(st.tuples(st.sampled_from(["read", "list", "move"]), paths), min_size=1, max_size=6))
def test_replay_of_any_observed_session_denies_nothing(sessions):
    calls = [call(tool, path=p if len(p) > 1 else p[0]) for tool, p in sessions]
    result = run(calls)
    judged, _, denied = replay(result.text, calls, "/home/ann")
    assert judged == len(calls) and denied == []


def test_a_tool_whose_recorded_arguments_were_cut_is_not_confined():
    cut = call("read", path="/srv/a/x")
    cut.arguments = {"_truncated": True, "bytes": 9000, "head": '{"path":"/srv/b/'}
    result = run([call("read", path="/srv/a/y"), cut])
    policy = load_policy(result.text.encode(), home=None)
    assert policy.path_confinement == ()
    assert "were cut in the log" in result.text


def test_logs_naming_too_many_tools_are_refused(monkeypatch):
    import assay.logs.suggest as suggest_module

    monkeypatch.setattr(suggest_module, "MAX_TOOLS", 3)
    observed = Observed()
    for name in ("a", "b", "c"):
        observed.call(call(name))
    observed.call(call("a"))  # a known tool is still counted
    with pytest.raises(SuggestError, match="more than 3 tools"):
        observed.call(call("d"))


@given(st.lists(st.text("ab/", min_size=1, max_size=10).map(lambda s: normalize("/" + s)), min_size=1, max_size=30))
def test_directories_hold_every_path_and_none_holds_another(values):
    from assay.policy.paths import is_inside

    dirs = directories(values)
    assert all(any(is_inside(v, d) for d in dirs) for v in values)
    assert not any(a != b and is_inside(a, b) for a in dirs for b in dirs)
    assert "/" not in dirs or "/" in values


def test_directories_of_many_paths_are_quick():
    import time

    values = [f"/srv/p{i % 97}/d{i % 13}/f{i}.txt" for i in range(50_000)]
    start = time.process_time()  # CPU time of this process: no other process counts
    assert len(directories(values)) == 97 * 13
    assert time.process_time() - start < 5


def normalize(path: str) -> str:
    from assay.policy.paths import normalize_path

    return normalize_path(path)
