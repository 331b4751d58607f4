"""Maintenance of a namespace as a library: ``store.admin`` (redistate.admin.Admin, or
AsyncAdmin for an AsyncStore) exports, imports, rotates keys, migrates and counts every
kind of stored data the registry (redistate.core.kinds) declares. ``redistate``'s commands
call these and print the reports."""

from __future__ import annotations

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
