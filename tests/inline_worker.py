"""A serverless-style handler in its own process, for tests/test_inline_leases.py. Run
as ``python -m tests.inline_worker URL NS MODE EVENT``.

``pause``: own EVENT's lease with ``renew="inline"`` (ttl 1 s), make one guarded save,
print ``saved``, block on stdin (the parent SIGSTOPs the process here, past the lease),
then try a second guarded save and print ``saved`` again or ``LockLost``.

``handle``: wait for a line on stdin (so that two handlers start together), then handle
EVENT once as a function would: own the task with ``renew="inline"`` and no wait; if
its state says done, print ``found done``; else run its one step (an RPUSH to the raw
list ``<NS>:effects:{EVENT}``, the effect) and save it done: ``did``. A lease held by
the other handler: ``refused``.
"""

from __future__ import annotations

import sys

import redis

from redistate import LockLost, LockTimeout, Store


def pause(store: Store, event: str) -> None:
    lease = store.lock(event, ttl=1, renew="inline").acquire()
    store.checkpoints.save(event, {"write": 1}, lease=lease)
    print("saved", flush=True)
    sys.stdin.readline()
    try:
        store.checkpoints.save(event, {"write": 2}, lease=lease)
        print("saved", flush=True)
    except LockLost:
        print("LockLost", flush=True)


def handle(store: Store, url: str, namespace: str, event: str) -> None:
    raw = redis.Redis.from_url(url)
    sys.stdin.readline()
    try:
        with store.task(event, ttl=30, wait=0, renew="inline") as run:
            if run.state.get("done"):
                print("found done", flush=True)
                return
            run.step("charge", lambda: raw.rpush(f"{namespace}:effects:{{{event}}}", "1"))
            run.save({"done": True})
            print("did", flush=True)
    except LockTimeout:
        print("refused", flush=True)


def main() -> None:
    url, namespace, mode, event = sys.argv[1:5]
    with Store.from_url(url, namespace=namespace) as store:
        if mode == "pause":
            pause(store, event)
        else:
            handle(store, url, namespace, event)


if __name__ == "__main__":
    main()
