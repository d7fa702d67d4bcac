"""Several hosts on one database: operator agents and bindings as rows (with a change counter), the host
registry with heartbeat leases, the owner host of each run, and (PostgreSQL) a statement trigger that
announces committed results on the ``agentrunner_results`` channel.

Revision ID: 0002_cluster
Revises: 0001_host_facts
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_cluster"
down_revision = "0001_host_facts"
branch_labels = None
depends_on = None

# One NOTIFY per run touched by an INSERT statement, carrying the newest host_seq it wrote; PostgreSQL
# delivers it when (and only if) the transaction commits, so a listener never hears of an uncommitted result.
_NOTIFY_FUNCTION = """
CREATE FUNCTION agentrunner_notify_results() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('agentrunner_results', s.run_id || ' ' || s.last_seq)
    FROM (SELECT run_id, max(host_seq) AS last_seq FROM agentrunner_new_results GROUP BY run_id) AS s;
    RETURN NULL;
END
$$
"""
_NOTIFY_TRIGGER = """
CREATE TRIGGER run_results_notify AFTER INSERT ON run_results
REFERENCING NEW TABLE AS agentrunner_new_results
FOR EACH STATEMENT EXECUTE FUNCTION agentrunner_notify_results()
"""


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    op.create_table(
        "agent_definitions",
        sa.Column("agent_id", sa.String(255), nullable=False),
        sa.Column("definition", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("agent_id", name="pk_agent_definitions"),
    )
    op.create_table(
        "binding_definitions",
        sa.Column("binding_id", sa.String(255), nullable=False),
        sa.Column("definition", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("binding_id", name="pk_binding_definitions"),
    )
    op.create_table(
        "change_counters",
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_change_counters"),
    )
    op.create_table(
        "hosts",
        sa.Column("host_id", sa.String(64), nullable=False),
        sa.Column("machine", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.BigInteger(), nullable=False),
        sa.Column("heartbeat_at", sa.BigInteger(), nullable=False),
        sa.Column("lease_expires_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("host_id", name="pk_hosts"),
    )
    op.create_index("ix_hosts_lease_expires_at", "hosts", ["lease_expires_at"])
    # a plain ADD COLUMN on both engines: a batch copy of ``runs`` on SQLite would cascade-delete its results
    op.add_column("runs", sa.Column("owner_host", sa.String(64), nullable=True))
    op.create_index("ix_runs_owner_host", "runs", ["owner_host"])
    if dialect == "postgresql":
        op.execute(_NOTIFY_FUNCTION)
        op.execute(_NOTIFY_TRIGGER)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "postgresql":
        op.execute("DROP TRIGGER run_results_notify ON run_results")
        op.execute("DROP FUNCTION agentrunner_notify_results()")
    op.drop_index("ix_runs_owner_host", "runs")
    op.drop_column("runs", "owner_host")
    op.drop_index("ix_hosts_lease_expires_at", "hosts")
    op.drop_table("hosts")
    op.drop_table("change_counters")
    op.drop_table("binding_definitions")
    op.drop_table("agent_definitions")
