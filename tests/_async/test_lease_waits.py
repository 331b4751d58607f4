"""How a lease waiter waits, counted in commands on a real server (async source of truth)."""

from __future__ import annotations

import pytest

from redistate import AsyncStore, LockTimeout
from tests.conftest import Backend
from tests.roundtrips import RoundTrips

pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)


async def test_a_waiter_blocks_on_a_lock_key_without_ttl(
    server_store: AsyncStore, server_backend: Backend, namespace: str, roundtrips: RoundTrips
) -> None:
    """A lock key with no TTL (set by hand, or by an old client): PTTL answers -1. The
    waiter blocks on the wake list (MAX_BLOCK at most per try), it does not poll: a
    1 s wait sent 700-800 acquire scripts when it took -1 for "about to expire"."""
    raw = server_backend.raw()
    key = server_store.keys.lock("t")
    raw.set(key, "0" * 32 + ",7")
    try:
        roundtrips.start()
        with pytest.raises(LockTimeout, match="'t'"):
            await server_store.lock("t", wait=1.0, renew=False).acquire()
        sent = [c for c in roundtrips.stop() if any(namespace in word for word in c)]
        tries = [c for c in sent if c[0].upper() == "FCALL"]
        blocks = [c for c in sent if c[0].upper() == "BLPOP"]
        # One try, one block for the whole second, one try at the deadline; a block cut
        # short by the server's ms rounding adds one more try after a local sleep.
        assert len(tries) <= 3 and len(blocks) == 1, sent
        assert raw.get(key) == b"0" * 32 + b",7" and raw.pttl(key) == -1  # left as found
    finally:
        raw.close()
