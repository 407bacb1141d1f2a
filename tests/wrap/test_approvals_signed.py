"""Signed approvals of the 2026-07-28 era (docs/serve.md, "Approvals"): the ``requestState`` a
gateway signs binds the approval to the user, the upstream, the exact call, an expiry and a
one-time nonce; the used nonces are the approvals guard's shared state. Sans-IO, the wall clock
injected."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.session.approvals.signed import MAX_STATE_PAYLOAD, SignedOffers

KEY = b"k" * 32


class Wall:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def offers(wall: Wall, subject: str = "user:i#alice", server: str = "local", key: bytes = KEY) -> SignedOffers:
    return SignedOffers(key, subject, server, wall, ttl=60)


def test_a_state_approves_its_call_once() -> None:
    wall = Wall()
    book = offers(wall)
    state = book.issue("send", {"text": "x"}, {}, 0.0)
    assert state is not None and state.startswith("assay-approval.2.")
    assert book.claims({"requestState": state})
    offer = book.redeem(state, "send", {"text": "x"})
    assert offer is not None and offer.restore == {} and not book.expired(offer, 0.0, 60)
    assert book.redeem(state, "send", {"text": "x"}) is None  # the nonce is used


@pytest.mark.parametrize(
    "other",
    [
        {"subject": "user:i#bob"},
        {"server": "web"},
        {"key": b"z" * 32},
    ],
)
def test_a_state_is_bound_to_user_upstream_and_key(other: dict[str, Any]) -> None:
    wall = Wall()
    state = offers(wall).issue("send", {"text": "x"}, {}, 0.0)
    assert offers(wall, **other).redeem(state, "send", {"text": "x"}) is None
    assert offers(wall).redeem(state, "send", {"text": "x"}) is not None  # each book has its own used set


def test_a_state_is_bound_to_the_exact_call() -> None:
    wall = Wall()
    book = offers(wall)
    state = book.issue("send", {"n": 1}, {}, 0.0)
    for name, arguments in (
        ("send", {"n": 2}),
        ("send", {"n": True}),
        ("Send", {"n": 1}),
        ("send", {"n": 1, "m": 0}),
    ):
        assert book.redeem(state, name, arguments) is None
    assert book.redeem(state, "send", {"n": 1}) is not None


def test_expiry_is_on_the_wall_clock_and_used_nonces_are_forgotten_after_it() -> None:
    wall = Wall()
    book = offers(wall)
    state = book.issue("send", {}, {}, 0.0)
    wall.now += 61.5
    offer = book.redeem(state, "send", {})
    assert offer is not None and book.expired(offer, 0.0, 60)
    assert book.export() is None  # expired entries are pruned from the shared state


def test_the_used_nonces_travel_through_the_shared_state() -> None:
    wall = Wall()
    one, two = offers(wall), offers(wall)  # two links (or replicas) of one user
    state = one.issue("send", {}, {}, 0.0)
    assert two.redeem(state, "send", {}) is not None
    one.restore(two.export())  # what the store's transaction gives the next decision
    assert one.redeem(state, "send", {}) is None


@pytest.mark.parametrize("value", [{}, "x", [["zz", 1]], [["0" * 32]], [["0" * 32, "1"]], [[1, 2]], [["0" * 32, 1, 2]]])
def test_a_shared_state_that_does_not_read_is_refused(value: Any) -> None:
    with pytest.raises(ValueError):
        offers(Wall()).restore(value)


def test_at_most_max_used_nonces_then_fail_closed() -> None:
    wall = Wall()
    book = offers(wall)
    book.limit = 3
    states = [book.issue("send", {"i": i}, {}, 0.0) for i in range(4)]
    assert all(book.redeem(states[i], "send", {"i": i}) is not None for i in range(3))
    assert book.redeem(states[3], "send", {"i": 3}) is None  # a used nonce is never forgotten early
    wall.now += 120
    assert book.redeem(book.issue("send", {}, {}, 0.0), "send", {}) is not None


def test_first_round_members_come_back_and_a_huge_one_is_refused() -> None:
    wall = Wall()
    book = offers(wall)
    params = {"requestState": "theirs\udc80", "inputResponses": {"q": {"action": "accept"}}}
    state = book.issue("send", {}, params, 0.0)
    offer = book.redeem(state, "send", {})
    assert offer is not None and offer.restore == params
    assert book.issue("send", {}, {"requestState": "x" * MAX_STATE_PAYLOAD}, 0.0) is None


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_any_change_to_a_state_is_refused(data: st.DataObject) -> None:
    wall = Wall()
    book = offers(wall)
    state = book.issue("send", {"a": [1, "b"]}, {"requestState": "r"}, 0.0)
    assert state is not None
    i = data.draw(st.integers(0, len(state) - 1))
    c = data.draw(st.characters(codec="utf-8"))
    forged = state[:i] + c + state[i + 1 :]
    if forged != state:
        assert book.redeem(forged, "send", {"a": [1, "b"]}) is None
    assert book.redeem(state, "send", {"a": [1, "b"]}) is not None
