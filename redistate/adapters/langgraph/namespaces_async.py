"""The LangGraph store's namespaces: I/O (async source of truth; ``memory.py`` is the pure
half).

A get, a put and a delete are one script on the namespace's slot; a put that creates a
namespace announces it to the registry before and after (two more scripts, on the
registry's slot). A search or a listing reads the registry, then every namespace it names in one
round trip per server (a cluster: per primary).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any, Final

from ...core.batching import raise_first
from ...core.connection_async import AsyncConnection
from ...core.keys import KeySpace
from ...core.kinds import MEMORY_KEY
from ...core.scripts import script
from ...records.collection_async import register
from ...records.erasure import entry
from ...records.spec import new_write_id
from .memory import SweepReport, put_args

__all__ = ["AsyncNamespaces"]

_PUT: Final = script("memory_put")
_GET: Final = script("memory_get")
_READ: Final = script("memory_read")
_ANNOUNCE: Final = script("memory_announce")
_FORGET: Final = script("memory_forget")
_SWEEP: Final = script("memory_sweep")
_PAGE: Final = 1000  # registry entries read a call
_ANNOUNCES: Final = 5  # a sweep forgetting the namespace each time: give up


class AsyncNamespaces:
    """Namespaces of items and their registry, in one redistate namespace."""

    __slots__ = ("_conn", "keys")

    def __init__(self, conn: AsyncConnection, keys: KeySpace) -> None:
        self._conn = conn
        self.keys = keys

    def _own(self, nsid: str) -> list[str]:
        return [self.keys.memory(nsid), self.keys.memory(nsid, "exp")]

    def _registry(self) -> list[str]:
        return [self.keys.memory_names(), self.keys.memory_names("gens")]

    async def register(self, user: str, nsid: str) -> None:
        """Add the namespace to ``user``'s index, before the put it registers."""
        await register(self._conn, self.keys, user, entry(MEMORY_KEY, nsid))

    async def get(
        self, reads: Sequence[tuple[str, Sequence[str], bool]]
    ) -> list[tuple[int, list[bytes | None]]]:
        """For each (namespace, keys, refresh): the server time (ms) and each key's
        stored item (None: absent or expired), the TTL of each found refreshed if
        asked; all in one round trip per server."""
        calls = [(_GET, self._own(n), ["1" if r else "0", *keys]) for n, keys, r in reads]
        out = []
        for reply in raise_first(await self._conn.scripts(calls)):
            out.append((int(reply[0]), [item or None for item in reply[1:]]))
        return out

    async def put(
        self,
        nsid: str,
        writes: Sequence[tuple[str, int | None, bytes]],
        guard: str = "",
        lease: Any = None,
    ) -> int:
        """Each (key, ttl ms or None to delete, encoded value) in one step; announced to
        the registry first when it creates the namespace; with ``guard``, only while
        ``lease`` holds the lock named like the namespace. Returns the server time."""
        keys = [
            *self._own(nsid),
            self.keys.memory(nsid, "tomb"),
            self.keys.memory(nsid, "writes"),
            self.keys.lock(nsid),
        ]
        gen = 0
        for _ in range(_ANNOUNCES + 1):
            wid = new_write_id()
            args = put_args(self._conn.memory_ms, wid, gen, writes, guard)
            reply = await self._conn.script(_PUT, keys, args, wid=wid, lease=lease)
            if int(reply[0]) != 0:
                if len(reply) > 2 and int(reply[2]):
                    # Created: a sweep may have forgotten the announcement and cleared
                    # its tomb just before this put. Announced again now, with an item
                    # there, no sweep can forget it.
                    await self._conn.script(_ANNOUNCE, self._registry(), [nsid])
                return int(reply[1]) if len(reply) > 1 else 0
            gen = int(await self._conn.script(_ANNOUNCE, self._registry(), [nsid]))
        raise RuntimeError(f"namespace {nsid!r} was swept away {_ANNOUNCES} times in a row")

    async def read(self, nsids: Sequence[str]) -> list[tuple[int, list[tuple[bytes, bytes]]]]:
        """Every live item of each namespace: (server time, [(key, stored)]), all in one
        round trip per server."""
        replies = await self._conn.scripts([(_READ, self._own(n), ()) for n in nsids])
        out = []
        for reply in raise_first(replies):
            flat = reply[1:]
            out.append((int(reply[0]), list(zip(flat[::2], flat[1::2], strict=True))))
        return out

    async def names(self, low: str, high: str) -> AsyncIterator[str]:
        """The registry's namespaces between two ZRANGEBYLEX bounds, in order (some may
        have no item left: a sweep takes them out)."""
        key = self.keys.memory_names()
        while True:
            page = await self._conn.idempotent("ZRANGEBYLEX", key, low, high, "LIMIT", 0, _PAGE)
            for name in page:
                yield name.decode("utf-8")
            if len(page) < _PAGE:
                return
            low = "(" + page[-1].decode("utf-8")

    async def live(self, nsids: Sequence[str]) -> list[bool]:
        """Whether each namespace has an item that has not expired (its keys expire with
        its last item)."""
        groups = [(self.keys.memory(n), [("EXISTS", self.keys.memory(n))]) for n in nsids]
        replies = await self._conn.batch(groups, atomic=False)
        return [bool(reply[0]) for reply in replies]

    async def sweep(self) -> SweepReport:
        """Delete expired items everywhere and take namespaces with none left out of the
        registry, each only if nobody announced it since this sweep read it."""
        expired = forgotten = 0
        page: list[str] = []
        async for name in self.names("-", "+"):
            page.append(name)
            if len(page) == _PAGE:
                report = await self._sweep(page)
                expired, forgotten, page = (
                    expired + report.expired,
                    forgotten + report.forgotten,
                    [],
                )
        if page:
            report = await self._sweep(page)
            expired, forgotten = expired + report.expired, forgotten + report.forgotten
        return SweepReport(expired, forgotten)

    async def _sweep(self, names: Sequence[str]) -> SweepReport:
        gens = await self._conn.idempotent("HMGET", self.keys.memory_names("gens"), *names)
        # A namespace without a generation was forgotten already: swept, no tomb left.
        read = {n: (g or b"0").decode() for n, g in zip(names, gens, strict=True)}
        expired, empty, todo = 0, [], list(names)
        while todo:  # a namespace with over 1,000 expired items takes several calls
            calls = [(_SWEEP, self._tombed(n), (read[n], "set")) for n in todo]
            again = []
            for name, reply in zip(todo, raise_first(await self._conn.scripts(calls)), strict=True):
                expired += int(reply[0])
                if int(reply[1]) and read[name] != "0":
                    empty.append(name)
                elif int(reply[2]):
                    again.append(name)
            todo = again
        if not empty:
            return SweepReport(expired, 0)
        pairs = [part for n in empty for part in (n, read[n])]
        forgotten = int(await self._conn.script(_FORGET, self._registry(), pairs))
        clear = [(_SWEEP, self._tombed(n), (read[n], "clear")) for n in empty]
        raise_first(await self._conn.scripts(clear))
        return SweepReport(expired, forgotten)

    def _tombed(self, nsid: str) -> list[str]:
        return [*self._own(nsid), self.keys.memory(nsid, "tomb")]
