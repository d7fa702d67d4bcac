"""Partial indexes on the event log: a row gets an index entry only where a query can look it up. Events
without a conversation leave the two conversation indexes (``uq_events_conversation_seq`` becomes a partial
unique index: its NULLs never conflicted, so uniqueness is unchanged), events without a run leave
``ix_events_run_id``, and ``ix_events_event_type_id`` keeps only the audit records (``host.backcall``), the
one type its query reads. ``ix_runs_owner_host`` goes: its one query (the runs of hosts that are gone)
reads the running runs through ``ix_runs_status``. An echo request's SQLite commit wrote 21 WAL pages
before, 13 after.

On SQLite ``uq_events_conversation_seq`` was part of ``CREATE TABLE``: the table is rebuilt without it (a
copy of the rows with their ids; nothing refers to ``events``, so no foreign key cascades).

Revision ID: 0005_partial_indexes
Revises: 0004_host_requests
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_partial_indexes"
down_revision = "0004_host_requests"
branch_labels = None
depends_on = None

_WITH_CONVERSATION = "conversation_id IS NOT NULL"
# (name, columns, WHERE of the partial index); the unique one is handled apart
_INDEXES: tuple[tuple[str, list[str], str], ...] = (
    ("ix_events_conversation_thread_seq", ["conversation_id", "thread_id", "seq"], _WITH_CONVERSATION),
    ("ix_events_run_id", ["run_id"], "run_id IS NOT NULL"),
    ("ix_events_event_type_id", ["event_type", "id"], "event_type = 'host.backcall'"),
)


def _where(condition: str) -> dict[str, sa.TextClause]:
    return {"sqlite_where": sa.text(condition), "postgresql_where": sa.text(condition)}


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    for name, _columns, _condition in _INDEXES:
        op.drop_index(name, table_name="events")
    if dialect == "sqlite":
        with op.batch_alter_table("events", recreate="always") as batch:
            batch.drop_constraint("uq_events_conversation_seq", type_="unique")
    else:
        op.drop_constraint("uq_events_conversation_seq", "events", type_="unique")
    op.create_index(
        "uq_events_conversation_seq",
        "events",
        ["conversation_id", "seq"],
        unique=True,
        **_where(_WITH_CONVERSATION),
    )
    for name, columns, condition in _INDEXES:
        op.create_index(name, "events", columns, **_where(condition))
    op.drop_index("ix_runs_owner_host", table_name="runs")


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    op.create_index("ix_runs_owner_host", "runs", ["owner_host"])
    for name, _columns, _condition in _INDEXES:
        op.drop_index(name, table_name="events")
    op.drop_index("uq_events_conversation_seq", table_name="events")
    if dialect == "sqlite":
        with op.batch_alter_table("events", recreate="always") as batch:
            batch.create_unique_constraint("uq_events_conversation_seq", ["conversation_id", "seq"])
    else:
        op.create_unique_constraint("uq_events_conversation_seq", "events", ["conversation_id", "seq"])
    for name, columns, _condition in _INDEXES:
        op.create_index(name, "events", columns)
