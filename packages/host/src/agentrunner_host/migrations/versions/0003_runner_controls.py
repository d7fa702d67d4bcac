"""Operator controls: the per-runner disable switch (``runner_controls``), and an index that lets the audit
query page the back-call records (``host.backcall`` events) without scanning the event log.

Revision ID: 0003_runner_controls
Revises: 0002_cluster
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_runner_controls"
down_revision = "0002_cluster"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runner_controls",
        sa.Column("runner_id", sa.String(255), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("disabled_by", sa.String(255), nullable=True),
        sa.Column("disabled_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("runner_id", name="pk_runner_controls"),
    )
    op.create_index("ix_events_event_type_id", "events", ["event_type", "id"])


def downgrade() -> None:
    op.drop_index("ix_events_event_type_id", table_name="events")
    op.drop_table("runner_controls")
