"""Helpers shared by the stores: dialect upserts, the stored thread form, structured keys."""

from __future__ import annotations

import hashlib
from typing import Any

from agentrunner import codec
from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite

__all__ = ["canonical", "digest", "insert_for", "main_line", "thread_or_none"]


def insert_for(dialect: str, table: Table) -> Any:
    """An ``INSERT`` with the dialect's ``ON CONFLICT`` support (both have the same method names)."""
    if dialect == "postgresql":
        return postgresql.insert(table)
    return sqlite.insert(table)


def main_line(thread_id: str | None) -> str:
    """The stored form of a thread id (``""`` for the main line)."""
    return thread_id or ""


def thread_or_none(stored: str | None) -> str | None:
    """The API form of a stored thread id."""
    return stored or None


def canonical(parts: tuple[str, ...] | list[str]) -> str:
    """A collision-free text form of structured parts: a JSON array (``["a:b"]`` ≠ ``["a","b"]``)."""
    return codec.dumps_str(list(parts))


def digest(text: str) -> str:
    """Hex SHA-256 of *text*, used as a fixed-width index key."""
    return hashlib.sha256(text.encode()).hexdigest()
