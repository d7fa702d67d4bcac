"""Host-owned facts: event log, transcript (with full-text search), runs and results, artifacts, state,
storage, idempotency keys.

Revision ID: 0001_host_facts
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001_host_facts"
down_revision = None
branch_labels = None
depends_on = None


def _ordered_key(length: int) -> sa.types.TypeEngine:
    return sa.String(length).with_variant(sa.String(length, collation="C"), "postgresql")


def upgrade() -> None:
    dialect = op.get_bind().dialect.name

    op.create_table(
        "sequence_counters",
        sa.Column("stream", sa.String(16), nullable=False),
        sa.Column("conversation_id", sa.String(255), nullable=False),
        sa.Column("thread_id", sa.String(255), nullable=False),
        sa.Column("last_seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("stream", "conversation_id", "thread_id", name="pk_sequence_counters"),
    )

    op.create_table(
        "events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("event_id", sa.String(255), nullable=False),
        sa.Column("event_type", sa.String(200), nullable=False),
        sa.Column("source", sa.String(100), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("conversation_id", sa.String(255), nullable=True),
        sa.Column("thread_id", sa.String(255), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=True),
        sa.Column("workspace_id", sa.String(255), nullable=True),
        sa.Column("bot_id", sa.String(255), nullable=True),
        sa.Column("actor_type", sa.String(100), nullable=True),
        sa.Column("actor_id", sa.String(255), nullable=True),
        sa.Column("subject_type", sa.String(100), nullable=True),
        sa.Column("subject_id", sa.String(255), nullable=True),
        sa.Column("source_event_type", sa.String(200), nullable=True),
        sa.Column("run_id", sa.String(255), nullable=True),
        sa.Column("runner_id", sa.String(255), nullable=True),
        sa.Column("summary", sa.Text(), nullable=True),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("event_time", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_events"),
        sa.UniqueConstraint("event_id", name="uq_events_event_id"),
        sa.UniqueConstraint("conversation_id", "seq", name="uq_events_conversation_seq"),
    )
    op.create_index("ix_events_conversation_thread_seq", "events", ["conversation_id", "thread_id", "seq"])
    op.create_index("ix_events_run_id", "events", ["run_id"])

    op.create_table(
        "transcript_items",
        sa.Column("conversation_id", sa.String(255), nullable=False),
        sa.Column("thread_id", sa.String(255), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("item_id", sa.String(255), nullable=False),
        sa.Column("workspace_id", sa.String(255), nullable=True),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("item_type", sa.String(16), nullable=False),
        sa.Column("event_id", sa.String(255), nullable=True),
        sa.Column("event_type", sa.String(200), nullable=True),
        sa.Column("run_id", sa.String(255), nullable=True),
        sa.Column("content", sa.Text(), nullable=True),
        sa.Column("contents", sa.Text(), nullable=False),
        sa.Column("artifacts", sa.Text(), nullable=False),
        sa.Column("metadata", sa.Text(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("conversation_id", "thread_id", "seq", name="pk_transcript_items"),
        sa.UniqueConstraint("item_id", name="uq_transcript_items_item_id"),
        sqlite_with_rowid=False,
    )
    if dialect == "sqlite":
        # Its own copy of the text: the transcript table is clustered WITHOUT ROWID, which external-content
        # FTS5 cannot point at. `scope` holds one token per (conversation, thread), built by the trigger
        # below exactly as agentrunner_host.stores.transcript.fts_scope builds it, so a search only walks
        # the postings of its own thread. The trigger fills the index inside the INSERT itself.
        op.execute(
            "CREATE VIRTUAL TABLE transcript_fts USING fts5("
            "body, scope, conversation_id UNINDEXED, thread_id UNINDEXED, seq UNINDEXED, "
            "tokenize = 'unicode61 remove_diacritics 2')"
        )
        op.execute(
            "CREATE TRIGGER transcript_items_fts AFTER INSERT ON transcript_items "
            "WHEN NEW.content IS NOT NULL AND NEW.content != '' BEGIN "
            "INSERT INTO transcript_fts (body, scope, conversation_id, thread_id, seq) VALUES ("
            "NEW.content, "
            "'s' || lower(hex(length(NEW.conversation_id) || ':' || NEW.conversation_id || char(31) || NEW.thread_id)), "
            "NEW.conversation_id, NEW.thread_id, NEW.seq); "
            "END"
        )
    elif dialect == "postgresql":
        op.execute(
            "CREATE INDEX ix_transcript_items_fts ON transcript_items "
            "USING gin (to_tsvector('simple'::regconfig, coalesce(content, '')))"
        )

    op.create_table(
        "runs",
        sa.Column("run_id", sa.String(255), nullable=False),
        sa.Column("runner_id", sa.String(255), nullable=False),
        sa.Column("plugin_id", sa.String(255), nullable=False),
        sa.Column("binding_id", sa.String(255), nullable=False),
        sa.Column("event_id", sa.String(255), nullable=False),
        sa.Column("conversation_id", sa.String(255), nullable=True),
        sa.Column("thread_id", sa.String(255), nullable=True),
        sa.Column("workspace_id", sa.String(255), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("code", sa.String(200), nullable=True),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column("snapshot", sa.Text(), nullable=False),
        sa.Column("snapshot_hash", sa.String(128), nullable=False),
        sa.Column("deadline_at", sa.Float(), nullable=True),
        sa.Column("started_at", sa.BigInteger(), nullable=False),
        sa.Column("ended_at", sa.BigInteger(), nullable=True),
        sa.Column("usage", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", name="pk_runs"),
    )
    op.create_index("ix_runs_status", "runs", ["status"])

    op.create_table(
        "run_results",
        sa.Column("run_id", sa.String(255), nullable=False),
        sa.Column("host_seq", sa.Integer(), nullable=False),
        sa.Column("runner_sequence", sa.Integer(), nullable=True),
        sa.Column("type", sa.String(100), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.run_id"], name="fk_run_results_run_id_runs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "host_seq", name="pk_run_results"),
    )

    op.create_table(
        "artifacts",
        sa.Column("artifact_id", sa.String(64), nullable=False),
        sa.Column("storage_name", sa.String(128), nullable=False),
        sa.Column("artifact_type", sa.String(50), nullable=False),
        sa.Column("mime_type", sa.String(255), nullable=True),
        sa.Column("name", sa.String(255), nullable=True),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("source", sa.String(50), nullable=False),
        sa.Column("summary", sa.Text(), nullable=True),
        sa.Column("conversation_id", sa.String(255), nullable=True),
        sa.Column("run_id", sa.String(255), nullable=True),
        sa.Column("binding_id", sa.String(255), nullable=True),
        sa.Column("workspace_id", sa.String(255), nullable=True),
        sa.Column("metadata", sa.Text(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("artifact_id", name="pk_artifacts"),
    )
    op.create_index("ix_artifacts_conversation_id", "artifacts", ["conversation_id"])
    op.create_index("ix_artifacts_run_id", "artifacts", ["run_id"])
    op.create_index("ix_artifacts_expires_at", "artifacts", ["expires_at"])

    op.create_table(
        "state_entries",
        sa.Column("owner_hash", sa.String(64), nullable=False),
        sa.Column("key", _ordered_key(255), nullable=False),
        sa.Column("scope", sa.String(32), nullable=False),
        sa.Column("owner", sa.Text(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("runner_id", sa.String(255), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("owner_hash", "key", name="pk_state_entries"),
    )

    op.create_table(
        "storage_entries",
        sa.Column("area", sa.String(32), nullable=False),
        sa.Column("owner_id", sa.String(255), nullable=False),
        sa.Column("key", _ordered_key(255), nullable=False),
        sa.Column("value", sa.LargeBinary(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("area", "owner_id", "key", name="pk_storage_entries"),
    )

    op.create_table(
        "idempotency_keys",
        sa.Column("scope_hash", sa.String(64), nullable=False),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("scope", sa.Text(), nullable=False),
        sa.Column("result", sa.Text(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("scope_hash", "key", name="pk_idempotency_keys"),
    )
    op.create_index("ix_idempotency_keys_created_at", "idempotency_keys", ["created_at"])


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    op.drop_table("idempotency_keys")
    op.drop_table("storage_entries")
    op.drop_table("state_entries")
    op.drop_table("artifacts")
    op.drop_table("run_results")
    op.drop_table("runs")
    if dialect == "sqlite":
        op.execute("DROP TRIGGER transcript_items_fts")
        op.execute("DROP TABLE transcript_fts")
    op.drop_table("transcript_items")
    op.drop_table("events")
    op.drop_table("sequence_counters")
