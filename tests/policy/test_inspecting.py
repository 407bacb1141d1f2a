"""The inspect, resources and prompts sections (docs/policy.md, "Inspecting what comes back",
"Resources and prompts") and the response selectors of flow rules ("Flow rules"): how they are
read, refused, digested, and what the flow tracker does when a result comes back."""

from __future__ import annotations

import pytest

from assay.policy import load_policy
from assay.policy.decision import Decision
from assay.policy.errors import PolicyError
from assay.policy.flows import FlowTracker
from assay.policy.inspecting import Settings
from assay.policy.guards import Part
from assay.policy.pipeline import Call, FlowGuard, Pipeline
from assay.policy.shared import SharedSession, part_of, shares_state, uses_taint
from assay.policy.storeapi import MemoryStore, SessionKey

HEAD = 'version: "2.0"\ntools: {allow: ["*"]}\n'
# the digest of HEAD before these sections existed (a policy without them keeps it)
HEAD_DIGEST = "sha256:29c4fbe3893379acbd52f6f80d6de7aa142d3e568fbaa97344ec8980c23a935c"


def load(text: str):
    return load_policy((HEAD + text).encode())


def test_a_policy_without_the_new_keys_keeps_its_digest() -> None:
    assert load("").digest == HEAD_DIGEST
    assert load("inspect: {secrets: mask}\n").digest != HEAD_DIGEST
    assert load("resources: {deny: [x]}\n").digest != load("prompts: {deny: [x]}\n").digest


def test_settings_merge_the_first_matching_entry_over_the_top_level() -> None:
    p = load("""inspect:
  secrets: mask
  injection: flag
  arguments: {secrets: deny}
  tools:
    - {tool: [read_*, cat], server: files, secrets: block, taint: true}
    - {tool: read_*, injection: strip}
""")
    i = p.inspect
    assert i.settings("files", "read_file") == Settings("block", "flag", "off", "deny", "off", True)
    assert i.settings("web", "read_file") == Settings("mask", "strip", "off", "deny", "off", False)
    assert i.settings("web", "other") == Settings("mask", "flag", "off", "deny", "off", False)
    assert i.any_results and not i.any_descriptions and i.any_taint
    assert load("inspect: {secrets: off}\n").inspect.settings("x", "y") == Settings()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("inspect: {secrets: maybe}", "inspect.secrets"),
        ("inspect: {arguments: {tainted: mask}}", "inspect.arguments.tainted"),
        ("inspect: {max_bytes: 10}", "between"),
        ("inspect: {oversize: drop}", "inspect.oversize"),
        ("inspect: {tools: [{secrets: mask}]}", "missing field tool"),
        ("inspect: {tools: [{tool: ''}]}", "non-empty"),
        ("inspect: {patterns: [{kind: aws_access_key_id, regex: abc}]}", "built-in"),
        ("inspect: {patterns: [{kind: mine, regex: '(?=a)b'}]}", "regular expression"),
        ("inspect: {patterns: [{kind: mine, regex: 'a*'}]}", "empty string"),
        ("resources: {allow: [1]}", "resources.allow"),
        ("prompts: {deny: ['']}", "must not be empty"),
        ("sequences: [{type: before, first: {tool: a, response: secrets}, then: b}]", "only a never_after trigger"),
        ("sequences: [{type: never_after, trigger: {tool: a, response: nope}, forbidden: b}]", "unknown response kind"),
        (
            "sequences: [{type: never_after, trigger: {tool: a, response: secrets, args_match: {x: y}}, forbidden: b}]",
            "no args_match",
        ),
    ],
)
def test_bad_values_are_refused_with_their_path(text: str, says: str) -> None:
    with pytest.raises(PolicyError) as err:
        load(text + "\n")
    assert says in str(err.value)


def test_list_rules() -> None:
    p = load("resources: {allow: ['file:///w/*'], deny: ['*secret*']}\nprompts: {deny: [debug_*]}\n")
    assert p.resources.refusal("file:///w/a") is None
    assert p.resources.refusal("file:///w/secret") == "deny"
    assert p.resources.refusal("https://x") == "allow"
    assert p.prompts.refusal("debug_x") == "deny" and p.prompts.refusal("summary") is None


FLOW = """aliases: {net: [fetch, "send_*"]}
sequences:
  - {type: never_after, id: r, trigger: {tool: "read*", server: files, response: secrets}, forbidden: net}
"""


def test_a_response_selector_matches_no_call_and_triggers_on_what_came_back() -> None:
    p = load(FLOW)
    t = FlowTracker(p.sequences, p.aliases, server="files")
    allow = Decision("allow", "x")
    t.enter("read_file", {}, 1.0)  # a call of the trigger's name is no trigger
    assert t.check("fetch", {}, allow) is None
    assert t.respond("read_file", frozenset({"injection"})) is True
    assert t.check("fetch", {}, allow) is None  # another kind
    t.respond("read_file", frozenset({"secrets"}))
    assert t.check("send_mail", {}, allow).reason_code == "E_SEQUENCE_VIOLATION"
    other = FlowTracker(p.sequences, p.aliases, server="web")  # the selector names server files
    other.enter("read_file", {}, 1.0)
    other.respond("read_file", frozenset({"secrets"}))
    assert other.check("fetch", {}, allow) is None
    assert FlowTracker(p.sequences, p.aliases, server="files").respond("x", frozenset()) is True


def test_update_runs_in_the_shared_transaction_and_the_other_wrap_sees_it() -> None:
    p = load(FLOW)
    store, key = MemoryStore(), SessionKey("name:s", "named", name="s")
    wraps = []
    for label in ("files", "web"):
        from assay.policy.state import SessionState

        state = SessionState()
        flows = FlowTracker(p.sequences, p.aliases, server=label)
        parts = [Part("flows", flows.export_state, flows.restore_state, flows.armed)]
        shared = SharedSession(store, key, part_of(p), label, state, parts, lambda: 1.0)
        wraps.append(Pipeline(p, state, [FlowGuard(flows)], clock=lambda: 1.0, shared=shared))
    a, b = wraps

    def transaction(pipe, work, entered=False, save=False):  # what wrap's call path does around a decision
        shared = pipe.shared
        problem = shared.loaded(_got(lambda: store.begin_blocking(shared.key, shared.part, shared.server, 1.0)))
        if problem is not None:
            return problem, None
        result = work()
        saved = shared.saving(entered, save=save)
        return shared.committed(saved, store.commit_blocking(saved, 1.0)), result

    def enter_read():
        a.decide(Call("read_file", {}, "files"))
        a.enter(Call("read_file", {}, "files"))

    assert transaction(a, enter_read, entered=True)[0] is None
    assert transaction(
        a, lambda: a.update(lambda now: a.guards[0].respond("read_file", frozenset({"secrets"}), now)), save=True
    ) == (None, True)
    _problem, got = transaction(b, lambda: b.decide(Call("fetch", {}, "web")))
    assert got.reason_code == "E_SEQUENCE_VIOLATION"
    store.fail = "disk full"
    assert transaction(a, lambda: True)[0] == "disk full"


def _got(begin):
    from assay.policy.storeapi import StoreError

    try:
        return begin()
    except StoreError as exc:
        return exc


def test_value_taint_shares_state_and_has_its_own_part() -> None:
    plain = load("sequences: [{type: require, tool: a}]\n")
    tainted = load("sequences: [{type: require, tool: a}]\ninspect: {arguments: {tainted: deny}}\n")
    assert uses_taint(tainted) and not uses_taint(plain)
    assert part_of(plain) != part_of(tainted)
    assert shares_state(load("inspect: {tools: [{tool: x, taint: true}]}\n"))
    assert not shares_state(load("inspect: {secrets: mask}\n"))
