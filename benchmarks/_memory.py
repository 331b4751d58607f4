"""Redis memory per session against payload size: redistate's record vs the same JSON
under a raw SET PX. MEMORY USAGE includes Redis's per-key overhead and the allocator's
size class, so one payload size alone can hide or exaggerate what the envelope costs."""

from __future__ import annotations

from typing import Any

import orjson
import redis
from harness import Row

from redistate import Store

__all__ = ["SIZES", "per_session"]

SIZES = (256, 512, 900, 1000, 1024, 1100, 2048, 4096)


def _value(size: int) -> dict[str, Any]:
    """A session-like dict whose orjson encoding is exactly ``size`` bytes."""
    data: dict[str, Any] = {"turn": 0, "role": "assistant", "text": ""}
    data["text"] = "x" * (size - len(orjson.dumps(data)))
    return data


def per_session(store: Store, raw: redis.Redis, prefix: str, ttl_s: int) -> list[Row]:
    """One row per payload size: MEMORY USAGE and STRLEN of each side."""
    rows: list[Row] = []
    for size in SIZES:
        value = _value(size)
        sid = f"mem-{size}"
        store.sessions.put(sid, value, ttl=ttl_s)
        key = store.keys.record("session", sid)
        raw_key = f"{prefix}:raw-mem:{{{sid}}}"
        raw.set(raw_key, orjson.dumps(value), px=ttl_s * 1000)
        rs_bytes = int(raw.memory_usage(key, samples=0) or 0)
        raw_bytes = int(raw.memory_usage(raw_key, samples=0) or 0)
        rows.append(
            {
                "payload": size,
                "rs_bytes": rs_bytes,
                "raw_bytes": raw_bytes,
                "rs_len": int(raw.strlen(key)),
                "extra": rs_bytes - raw_bytes,
                "over_payload": rs_bytes - size,
            }
        )
    return rows
