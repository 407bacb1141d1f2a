"""The connection limits' bookkeeping, in memory (docs/serve.md, "Connections"): at most
``max_connections`` in all and ``max_connections_per_address`` from one address, an address
forgotten with its last connection, refusals reported at most once a minute, and the soft limit
on open files raised to fit them."""

from __future__ import annotations

import ipaddress

from hypothesis import given
from hypothesis import strategies as st

from assay.gateway.connections import FILES_RESERVE, WARN_EVERY_S, ConnectionGate, files_limit, peer_key


def test_one_address_is_held_to_its_cap_and_another_still_gets_in() -> None:
    gate = ConnectionGate(total=10, per_address=2)
    assert gate.enter("10.0.0.1", 0) is None
    assert gate.enter("10.0.0.1", 0) is None
    refused = gate.enter("10.0.0.1", 0)
    assert refused is not None
    assert (refused.limit, refused.value) == ("max_connections_per_address", 2)
    assert gate.enter("10.0.0.2", 0) is None
    assert (gate.open, gate.held("10.0.0.1"), gate.held("10.0.0.2"), gate.refused) == (3, 2, 1, 1)


def test_the_total_cap_holds_across_addresses_and_a_leave_makes_room() -> None:
    gate = ConnectionGate(total=3, per_address=2)
    for address in ("a", "a", "b"):
        assert gate.enter(address, 0) is None
    refused = gate.enter("c", 0)
    assert refused is not None and (refused.limit, refused.value) == ("max_connections", 3)
    gate.leave("a")
    assert gate.enter("c", 0) is None
    assert gate.open == 3


def test_an_address_is_forgotten_with_its_last_connection() -> None:
    gate = ConnectionGate(total=5, per_address=5)
    gate.enter("a", 0)
    gate.enter("a", 0)
    gate.leave("a")
    assert gate.addresses == 1
    gate.leave("a")
    assert (gate.addresses, gate.open) == (0, 0)
    gate.leave("a")  # one leave too many is not counted
    gate.leave("never")
    assert (gate.addresses, gate.open) == (0, 0)


def test_refusals_are_reported_once_then_at_most_once_a_minute() -> None:
    gate = ConnectionGate(total=1, per_address=1)
    gate.enter("a", 0)
    reports = [r.report for r in (gate.enter("a", t) for t in (100.0, 101.0, 100.0 + WARN_EVERY_S - 1))]
    assert reports == [True, False, False]
    later = gate.enter("b", 100.0 + WARN_EVERY_S)
    assert later is not None and later.report and later.limit == "max_connections"
    assert gate.refused == 4


ops = st.lists(st.tuples(st.booleans(), st.sampled_from(["a", "b", "c", "d"])), max_size=200)


@given(total=st.integers(1, 6), per_address=st.integers(1, 6), steps=ops)
def test_no_sequence_passes_a_cap_and_all_leaving_empties_the_gate(total: int, per_address: int, steps: list) -> None:
    gate = ConnectionGate(total, per_address)
    taken: dict[str, int] = {}
    for entering, address in steps:
        if entering:
            refused = gate.enter(address, 0)
            fits = sum(taken.values()) < total and taken.get(address, 0) < per_address
            assert (refused is None) == fits
            if refused is None:
                taken[address] = taken.get(address, 0) + 1
        elif taken.get(address):
            gate.leave(address)
            taken[address] -= 1
        assert gate.open == sum(taken.values()) <= total
        assert all(gate.held(a) == n <= per_address for a, n in taken.items())
    for address, n in taken.items():
        for _ in range(n):
            gate.leave(address)
    assert (gate.open, gate.addresses) == (0, 0)


def test_the_open_files_limit_is_raised_to_fit_the_connections_as_far_as_the_hard_limit_allows() -> None:
    wanted = 1024 + FILES_RESERVE
    assert files_limit(1024, soft=1024, hard=524288) == wanted
    assert files_limit(1024, soft=1024, hard=1500) == 1500
    assert files_limit(1024, soft=1024, hard=-1) == wanted  # RLIM_INFINITY
    assert files_limit(1024, soft=wanted, hard=524288) is None
    assert files_limit(1024, soft=-1, hard=-1) is None


def test_a_peer_is_counted_by_its_ipv4_address_or_its_ipv6_64() -> None:
    assert peer_key("10.0.0.7") == "10.0.0.7"
    assert peer_key("::ffff:10.0.0.7") == "10.0.0.7"  # a dual-stack socket's IPv4 client
    same = {peer_key(a) for a in ("2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:DB8:1:2:0::9")}
    assert same == {"2001:db8:1:2::/64"}
    assert peer_key("2001:db8:1:3::1") == "2001:db8:1:3::/64"
    assert peer_key("fe80::1%eth0") == "fe80::/64"
    assert peer_key("") == "" and peer_key("not an address") == "not an address"


@given(st.ip_addresses(v=6))
def test_every_address_of_a_64_counts_as_that_64(ip) -> None:
    key = peer_key(str(ip))
    if ip.ipv4_mapped is None:
        assert key == str(ipaddress.IPv6Network((ip, 64), strict=False))
        assert peer_key(ip.exploded) == key  # however it is written
    else:
        assert key == str(ip.ipv4_mapped)
