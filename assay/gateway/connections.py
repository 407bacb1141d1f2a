"""How many connections the front holds open (docs/serve.md, "Connections"): at most
``limits.max_connections`` in all and ``limits.max_connections_per_address`` from one peer
address, so a client that opens connections and sends nothing cannot take every file descriptor
and wedge the gateway for everyone. Sans-IO: the HTTP shell tells each connection's start and
end; the clock is the caller's."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

__all__ = ["ConnectionGate", "FILES_RESERVE", "Refused", "WARN_EVERY_S", "files_limit", "peer_key"]

#: a refusal is reported (``Refused.report``) at most once in this many seconds
WARN_EVERY_S = 60.0
#: file descriptors kept beyond ``max_connections`` for the rest: the upstreams' pipes and
#: sockets, the store, the logs
FILES_RESERVE = 1024


def files_limit(max_connections: int, soft: int, hard: int) -> int | None:
    """The soft limit on open files to set so ``max_connections`` connections and
    :data:`FILES_RESERVE` more fit, as far as the hard limit allows (-1 for either is
    unlimited); ``None`` when the soft limit already suffices."""
    wanted = max_connections + FILES_RESERVE
    if soft < 0 or soft >= wanted:
        return None
    return wanted if hard < 0 else min(wanted, hard)


def peer_key(address: str) -> str:
    """What ``max_connections_per_address`` counts a peer by: an IPv4 address (also written as
    an IPv4-mapped IPv6 one) itself, an IPv6 address by its /64, since one client commonly holds
    a whole /64; anything else (no address) as given."""
    try:
        ip = ipaddress.ip_address(address.partition("%")[0])  # a link-local zone names no client
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


@dataclass(frozen=True)
class Refused:
    """A connection not taken: which limit (``limits.<name>``), its value, and whether the
    shell should report it now (the first refusal, then at most once per :data:`WARN_EVERY_S`)."""

    limit: str
    value: int
    report: bool


class ConnectionGate:
    """The connections open, in all and by peer address. An address is forgotten when its last
    connection ends, so memory follows the connections open, never the addresses seen."""

    __slots__ = ("total", "per_address", "open", "_by_address", "_reported_at", "refused")

    def __init__(self, total: int, per_address: int) -> None:
        self.total = total
        self.per_address = per_address
        self.open = 0
        self.refused = 0
        self._by_address: dict[str, int] = {}
        self._reported_at: float | None = None

    def enter(self, address: str, now: float) -> Refused | None:
        """A connection from ``address`` starts: ``None`` when it is taken (then :meth:`leave`
        must follow), else why not."""
        held = self._by_address.get(address, 0)
        if self.open >= self.total:
            return self._refuse("max_connections", self.total, now)
        if held >= self.per_address:
            return self._refuse("max_connections_per_address", self.per_address, now)
        self.open += 1
        self._by_address[address] = held + 1
        return None

    def leave(self, address: str) -> None:
        """A connection :meth:`enter` took has ended."""
        held = self._by_address.get(address, 0)
        if held <= 0:
            return  # not ours to count (never raised: a shell's mistake must not end a connection's task)
        self.open -= 1
        if held == 1:
            del self._by_address[address]
        else:
            self._by_address[address] = held - 1

    def held(self, address: str) -> int:
        return self._by_address.get(address, 0)

    @property
    def addresses(self) -> int:
        return len(self._by_address)

    def _refuse(self, limit: str, value: int, now: float) -> Refused:
        self.refused += 1
        report = self._reported_at is None or now - self._reported_at >= WARN_EVERY_S
        if report:
            self._reported_at = now
        return Refused(limit, value, report)
