"""Maintenance of a namespace as a library: ``store.admin`` (redistate.admin.Admin, or
AsyncAdmin for an AsyncStore) exports, imports, rotates keys, migrates and counts every
kind of stored data the registry (redistate.core.kinds) declares. ``redistate``'s commands
call these and print the reports.

Names are imported when first used: ``redistate ls`` reads ``admin.stats`` and needs none
of the backup machinery.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.lazy import lazy_names

if TYPE_CHECKING:
    from .admin import Admin
    from .admin_async import AsyncAdmin
    from .backup_format import BadFile
    from .reports import (
        ExportReport,
        ImportReport,
        KindStats,
        MigrateReport,
        RotateReport,
        Scanned,
    )

__all__ = [
    "Admin",
    "AsyncAdmin",
    "BadFile",
    "ExportReport",
    "ImportReport",
    "KindStats",
    "MigrateReport",
    "RotateReport",
    "Scanned",
]

_LAZY = {
    "Admin": ".admin",
    "AsyncAdmin": ".admin_async",
    "BadFile": ".backup_format",
    "ExportReport": ".reports",
    "ImportReport": ".reports",
    "KindStats": ".reports",
    "MigrateReport": ".reports",
    "RotateReport": ".reports",
    "Scanned": ".reports",
}


__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())
