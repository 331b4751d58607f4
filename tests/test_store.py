"""Store construction, connection failures and packaging concerns."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from redistate import AsyncStore, IntegrityError, RetryPolicy, Store, StoreUnavailable
from tests.conftest import Backend
from tests.servers import Server, free_port

pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)


def test_unreachable_server_names_the_address() -> None:
    port = free_port()
    store = Store.from_url(f"redis://127.0.0.1:{port}/0", timeout=1)
    with pytest.raises(StoreUnavailable, match=f"127.0.0.1:{port}") as info:
        store.sessions.get("s")
    assert isinstance(info.value.__cause__, redis.ConnectionError)


async def test_unreachable_server_async() -> None:
    port = free_port()
    store = AsyncStore.from_url(f"redis://127.0.0.1:{port}/0", timeout=1)
    with pytest.raises(StoreUnavailable, match=f"127.0.0.1:{port}") as info:
        await store.sessions.put("s", {})
    assert isinstance(info.value.__cause__, redis.ConnectionError)  # the script path chains too
    await store.aclose()


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A socket that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield int(listener.getsockname()[1])
    stop.set()
    thread.join()
    for conn in accepted:
        conn.close()
    listener.close()


def test_a_silent_server_fails_within_the_timeout(silent_server: int) -> None:
    store = Store.from_url(
        f"redis://127.0.0.1:{silent_server}/0", timeout=0.3, retry=RetryPolicy(attempts=1)
    )
    started = time.monotonic()
    with pytest.raises(StoreUnavailable, match=f"127.0.0.1:{silent_server}"):
        store.users.put("u", {"a": 1})
    # Bounded by the configured timeout (generous slack for a loaded CI machine).
    assert time.monotonic() - started < 3


def test_a_silent_server_fails_within_the_retry_bound(silent_server: int) -> None:
    policy = RetryPolicy(deadline=1.0)
    store = Store.from_url(f"redis://127.0.0.1:{silent_server}/0", timeout=0.3, retry=policy)
    started = time.monotonic()
    with pytest.raises(StoreUnavailable, match=r"gave up after \d+ tries") as info:
        store.users.put("u", {"a": 1})
    # At most the deadline plus one socket timeout (slack for a loaded CI machine).
    assert time.monotonic() - started < 1.0 + 0.3 + 1.5
    assert store._conn.resends >= 1 and isinstance(info.value.__cause__, redis.TimeoutError)


async def test_a_silent_server_fails_within_the_retry_bound_async(silent_server: int) -> None:
    policy = RetryPolicy(deadline=1.0)
    store = AsyncStore.from_url(f"redis://127.0.0.1:{silent_server}/0", timeout=0.3, retry=policy)
    started = time.monotonic()
    with pytest.raises(StoreUnavailable, match=f"127.0.0.1:{silent_server}"):
        await store.users.put("u", {"a": 1})
    assert time.monotonic() - started < 1.0 + 0.3 + 1.5
    await store.aclose()


def test_clients_of_the_wrong_flavour_are_refused() -> None:
    import redis.asyncio

    with pytest.raises(TypeError, match=r"redis\.asyncio\.Redis"):
        AsyncStore(redis.Redis())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Redis"):
        Store(redis.asyncio.Redis())  # type: ignore[arg-type]


def test_from_url_passes_other_options_to_redis(server_backend: Backend, namespace: str) -> None:
    with Store.from_url(server_backend.url, namespace=namespace, client_name="agent-7") as store:
        store.users.put("u", {})
        assert store.client.client_getname() == "agent-7"


async def test_update_takes_a_coroutine_function(backend: Backend, namespace: str) -> None:
    store = AsyncStore(backend.async_client(), namespace=namespace)

    async def bump(data: dict[str, int]) -> dict[str, int]:
        await asyncio.sleep(0)
        return {"n": data.get("n", 0) + 1}

    await store.users.update("u", bump)
    rec = await store.users.update("u", bump)
    assert rec.data == {"n": 2}
    await store.aclose()


def test_sync_update_refuses_a_coroutine_function(backend: Backend, namespace: str) -> None:
    store = Store(backend.sync_client(), namespace=namespace)

    async def bump(data: dict[str, int]) -> dict[str, int]:
        return {"n": 1}

    with pytest.raises(TypeError, match="AsyncStore"):
        store.users.update("u", bump)
    assert store.users.get("u") is None


def test_embedded_errors_name_the_embedded_backend() -> None:
    store = Store.embedded()
    store.client.hset("redistate:user:{h}", "f", "v")
    with pytest.raises(IntegrityError, match="embedded"):
        store.users.get("h")


def test_decode_responses_clients_are_refused(server_backend: Backend) -> None:
    client = redis.Redis.from_url(server_backend.url, decode_responses=True)
    with pytest.raises(ValueError, match="decode_responses"):
        Store(client)
    client.close()


def test_from_url(server_backend: Backend, namespace: str) -> None:
    with Store.from_url(server_backend.url, namespace=namespace) as store:
        assert store.sessions.put("s", {"a": 1}).data == {"a": 1}
        assert store.client.get(store.keys.record("session", "s")) is not None


async def test_async_from_url(server_backend: Backend, namespace: str) -> None:
    async with AsyncStore.from_url(server_backend.url, namespace=namespace) as store:
        assert (await store.sessions.put("s", {"a": 1})).data == {"a": 1}


def test_embedded_needs_no_server() -> None:
    store = Store.embedded(namespace="demo")
    store.sessions.put("s", {"turn": 1})
    rec = store.sessions.update("s", lambda d: {"turn": d["turn"] + 1})
    assert rec.data == {"turn": 2}
    assert list(store.sessions.ids()) == ["s"]


async def test_async_embedded_needs_no_server() -> None:
    store = AsyncStore.embedded()
    await store.users.merge("u", {"a": {"b": 1}})
    rec = await store.users.merge("u", {"a": {"c": 2}})
    assert rec.data == {"a": {"b": 1, "c": 2}}


def test_import_is_light() -> None:
    code = (
        "import sys, redistate\n"
        "heavy = ('fakeredis', 'lupa', 'redis.asyncio', 'hypothesis')\n"
        "heavy = [m for m in heavy if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_a_first_put_loads_only_what_a_put_needs(redis7_server: Server, namespace: str) -> None:
    """A serverless cold start: a fresh process's first put imports no lease, batch,
    erasure, signing or TLS-probe code and reads one Lua file, its script's (the
    index names the library: no other file is read or hashed)."""
    with Store.from_url(redis7_server.url, namespace=namespace) as warm:
        warm.sessions.put("warm", {})  # the server holds the function library now
    code = (
        "import json, sys\n"
        "from redistate import Store\n"
        "store = Store.from_url(sys.argv[1], namespace=sys.argv[2])\n"
        "store.sessions.put('s', {'a': 1})\n"
        "from redistate.core import scripts\n"
        "print(json.dumps({'modules': sorted(sys.modules),"
        " 'lua': scripts._read.cache_info().currsize}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, redis7_server.url, namespace],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    modules = set(seen["modules"])
    for name in (
        "redistate.leases.spec",
        "redistate.leases.lease",
        "redistate.records.erasure",
        "redistate.batch",
        "redistate.core.signing",
        "redistate.core.tls_probe",
        "redistate.checkpoints",
        "redistate.events",
        "tenacity",
        "difflib",
    ):
        assert not any(m == name or m.startswith(name + ".") for m in modules), name
    assert seen["lua"] == 1
    check = Store.from_url(redis7_server.url, namespace=namespace)
    record = check.sessions.get("s")
    assert record is not None and record.data == {"a": 1}
    check.close()


def test_concurrent_coroutines_lose_nothing(backend: Backend, namespace: str) -> None:
    async def main() -> dict[str, int]:
        store = AsyncStore(backend.async_client(), namespace=namespace)
        await asyncio.gather(*(store.users.merge("u", {f"k{i}": i}) for i in range(60)))
        await asyncio.gather(
            *(store.sessions.update("s", lambda d: {"n": d.get("n", 0) + 1}) for _ in range(60))
        )
        u, s = await store.users.get("u"), await store.sessions.get("s")
        await store.aclose()
        assert u is not None and s is not None
        return {"keys": len(u.data), "n": s.data["n"]}

    assert asyncio.run(main()) == {"keys": 60, "n": 60}


def test_concurrent_threads_lose_nothing(backend: Backend, namespace: str) -> None:
    store = Store(backend.sync_client(), namespace=namespace)

    def work(t: int) -> None:
        for i in range(25):
            store.users.merge("u", {f"t{t}-{i}": i})
            store.sessions.update("s", lambda d: {"n": d.get("n", 0) + 1})

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    u, s = store.users.get("u"), store.sessions.get("s")
    assert u is not None and len(u.data) == 100
    assert s is not None and s.data["n"] == 100


async def test_a_plain_with_on_async_objects_says_async_with() -> None:
    """Leases, task runs and the store of an AsyncStore are async context managers:
    ``with`` (not ``async with``) is refused with the fix in the message."""
    store = AsyncStore.embedded()
    for target in (store.lock("t1"), store.task("t1"), store):
        refused = pytest.raises(TypeError, match="use 'async with', not 'with'")
        with refused, target:
            pytest.fail("entered")
    async with store.lock("t1") as lease:  # the right way still works
        assert lease.held
    await store.aclose()


def test_a_store_imported_from_a_zip_runs_its_scripts(
    server_backend: Backend, namespace: str, tmp_path: Path
) -> None:
    """zipimport (a bundled function, a zipapp): the Lua files and the library's name
    are read through importlib.resources, not the file system."""
    import zipfile

    root = Path(__file__).resolve().parent.parent
    bundle = tmp_path / "bundle.zip"
    with zipfile.ZipFile(bundle, "w") as zipped:
        for path in (root / "redistate").rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                zipped.write(path, path.relative_to(root).as_posix())
    code = (
        f"import sys; sys.path.insert(0, {str(bundle)!r})\n"
        "import redistate; assert redistate.__file__.startswith(sys.path[0]), redistate.__file__\n"
        "from redistate import Store\n"
        f"store = Store.from_url({server_backend.url!r}, namespace={namespace!r})\n"
        "assert store.sessions.put('s1', {'n': 1}).version > 0\n"
        "print(store.sessions.get('s1').data)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "{'n': 1}"


def test_from_url_names_redistate_to_the_server(valkey9_server: Any) -> None:
    """CLIENT SETINFO (Valkey; Redis from 7.2) names redistate as redis-py's upstream
    driver, so CLIENT LIST tells redistate's connections apart."""
    import redistate

    store = Store.from_url(valkey9_server.url, namespace="setinfo")
    store.sessions.put("s", {})
    raw = redis.Redis.from_url(valkey9_server.url)
    names = {c.get("lib-name") for c in raw.client_list()}
    assert f"redis-py(redistate_v{redistate.__version__})" in names, names
    store.close()
    raw.close()
