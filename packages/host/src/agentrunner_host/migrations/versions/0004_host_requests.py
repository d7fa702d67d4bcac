"""Requests between hosts that must not be lost with a notification: a stored request addressed to one host
(cancel a run it executes, start a run on a runtime attached to it), and which host has which remote runtime
attached.

Revision ID: 0004_host_requests
Revises: 0003_runner_controls
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_host_requests"
down_revision = "0003_runner_controls"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "host_requests",
        sa.Column("request_id", sa.String(64), nullable=False),
        sa.Column("target_host", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("run_id", sa.String(64), nullable=True),
        sa.Column("body", sa.Text(), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("claimed_at", sa.BigInteger(), nullable=True),
        sa.Column("answer", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("request_id", name="pk_host_requests"),
    )
    op.create_index("ix_host_requests_target_host", "host_requests", ["target_host"])
    op.create_table(
        "runtime_attachments",
        sa.Column("plugin_id", sa.String(255), nullable=False),
        sa.Column("host_id", sa.String(64), nullable=False),
        sa.Column("attached_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("plugin_id", "host_id", name="pk_runtime_attachments"),
    )


def downgrade() -> None:
    op.drop_table("runtime_attachments")
    op.drop_index("ix_host_requests_target_host", "host_requests")
    op.drop_table("host_requests")
