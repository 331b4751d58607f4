"""Counts the fault-injection tests report, printed as one table at the end of the run."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["LEASE_REPORTS", "REPORTS", "FaultReport", "LeaseReport", "lease_table", "tally"]


@dataclass(frozen=True)
class FaultReport:
    fault: str
    backend: str
    acknowledged: int  # writes whose call returned
    found: int  # of those, present afterwards
    duplicated: int  # writes present more than once
    failed: int  # calls that raised StoreUnavailable after the retry bound
    resends: int  # tries after a transient failure
    note: str = ""

    def tail(self) -> tuple[int, int, str]:
        return self.failed, self.resends, self.note

    @property
    def lost(self) -> int:
        return self.acknowledged - self.found


REPORTS: list[FaultReport] = []


def tally(
    fault: str,
    backend: str,
    acknowledged: Iterable[str],
    stored: Iterable[str],
    *,
    failed: int = 0,
    resends: int = 0,
    note: str = "",
) -> FaultReport:
    """Compare what callers were told was written with what is stored; keep the counts."""
    counts = Counter(stored)
    acked = set(acknowledged)
    report = FaultReport(
        fault,
        backend,
        acknowledged=len(acked),
        found=sum(1 for tag in acked if counts[tag] > 0),
        duplicated=sum(1 for n in counts.values() if n > 1),
        failed=failed,
        resends=resends,
        note=note,
    )
    REPORTS.append(report)
    return report


def table() -> list[str]:
    header = ("fault", "backend", "acked", "found", "lost", "dup", "failed", "resends", "note")
    rows = [
        (r.fault, r.backend, r.acknowledged, r.found, r.lost, r.duplicated, *r.tail())
        for r in REPORTS
    ]
    return _render(header, rows)


def _render(header: tuple[str, ...], rows: Sequence[tuple[object, ...]]) -> list[str]:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=False)]
    lines = [" | ".join(str(x).ljust(w) for x, w in zip(header, widths, strict=True))]
    lines.append("-+-".join("-" * w for w in widths))
    lines += [" | ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=True)) for row in rows]
    return lines


@dataclass(frozen=True)
class LeaseReport:
    """One lease experiment: how often ownership was violated (each must be 0)."""

    fault: str
    backend: str
    runs: int
    tool_calls_repeated: int  # calls a stale owner started after another took over
    fences_repeated: int  # a fence issued twice, or one not above every earlier one
    note: str = ""


LEASE_REPORTS: list[LeaseReport] = []


def lease_table() -> list[str]:
    header = ("fault", "backend", "runs", "tool calls repeated", "fences repeated", "note")
    rows: list[tuple[object, ...]] = [
        (r.fault, r.backend, r.runs, r.tool_calls_repeated, r.fences_repeated, r.note)
        for r in LEASE_REPORTS
    ]
    return _render(header, rows)
