"""Pydantic AI conversations, the pure half: where each value is bound (the codec's
context), the scripts' replies (``lua/pai_*.lua``), the record's hash fields. No I/O,
no pydantic-ai import.

A conversation is the entity ``<conversation id>``; its three keys share its hash
slot: the record (a hash: ``rev``, the encoded ``body``, ``upd`` (ms, as listings
order it), ``scope``, and ``title``, ``meta`` and their version ``dver``, which only
``pai_details`` writes), its entries (entry id -> encoded entry) and their parents
(entry id -> the entry before it). Every entry a conversation's history, or a branch
it left, reaches is in its own slot: a fork copies the history it keeps (the same
entry ids and bytes: an entry is bound to its id alone), so a history is one script
and a delete one ``DEL``.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final

__all__ = [
    "FIELDS",
    "Written",
    "entry_context",
    "record_context",
]

# HMGET order of a record read.
FIELDS: Final = ("rev", "body", "title", "meta", "dver", "upd", "scope")


class Written(IntEnum):
    """pai_write's reply codes."""

    WRITTEN = 1
    RESENT = 2  # a resend of a save already made: its revision is stored
    CONFLICT = 3  # the stored revision is another
    HEAD_MISSING = 4  # the head is neither stored nor new


def record_context(conversation_id: str, field: str) -> bytes:
    """What a record's encoded ``field`` (body, title, meta) is bound to: it cannot be
    moved to another conversation or field unnoticed (an encrypting codec's AAD)."""
    return f"pydantic-ai\0{field}\0{conversation_id}".encode("utf-8", "surrogatepass")


def entry_context(entry_id: str) -> bytes:
    """What an encoded entry is bound to: its id alone, so a fork's copy is the same
    bytes in another conversation's slot."""
    return f"pydantic-ai\0entry\0{entry_id}".encode("utf-8", "surrogatepass")
