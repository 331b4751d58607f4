"""Quickstart (sync): sessions that expire, users that many writers update safely.

python examples/quickstart.py                       # embedded, no server needed
REDISTATE_URL=redis://localhost:6379/0 python examples/quickstart.py
"""

from __future__ import annotations

import os

from redistate import ConflictError, Store

url = os.environ.get("REDISTATE_URL")
store = (
    Store.from_url(url, namespace="quickstart") if url else Store.embedded(namespace="quickstart")
)

# A session: expires after an hour unless touched.
rec = store.sessions.put("s1", {"turn": 1, "scratch": []}, ttl=3600)
print(f"session s1 v{rec.version} expires {rec.expires_at:%H:%M:%S} UTC")

# Read-modify-write without lost updates: retried if someone wrote in between.
rec = store.sessions.update("s1", lambda d: {**d, "turn": d["turn"] + 1})
print("after update:", rec.data)

# Compare-and-set: a stale version is refused, nothing is overwritten.
try:
    store.sessions.put("s1", {"turn": 99}, if_version=rec.version - 1)
except ConflictError as exc:
    print("refused:", exc)

# Users live until deleted; merge is an atomic RFC 7386 merge patch.
store.users.merge("u1", {"prefs": {"lang": "en", "tz": "UTC"}})
user = store.users.merge("u1", {"prefs": {"lang": "zh", "tz": None}})
print("user u1:", user.data)

print("sessions:", sorted(store.sessions.ids()), "ttl left:", store.sessions.ttl("s1"))
store.sessions.delete("s1")
store.users.delete("u1")
store.close()
