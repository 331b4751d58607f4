"""Counts the fault-injection tests report, printed as one table at the end of the run."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["REPORTS", "FaultReport", "tally"]


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
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=False)]
    lines = [" | ".join(str(x).ljust(w) for x, w in zip(header, widths, strict=True))]
    lines.append("-+-".join("-" * w for w in widths))
    lines += [" | ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=True)) for row in rows]
    return lines
