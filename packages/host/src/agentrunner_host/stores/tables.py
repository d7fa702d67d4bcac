"""The tables of the host-owned facts (SQLAlchemy 2 typed declarative models).

The migrations in ``agentrunner_host/migrations`` create exactly these tables; a test compares a migrated
database with this metadata on both engines. Conventions:

* timestamps are integer Unix epoch milliseconds (``BigInteger``), never naive datetimes;
* JSON columns hold text encoded by ``agentrunner.codec`` (orjson);
* the main line of a conversation is stored as thread ``""`` so it can be part of a primary key;
* keys that are listed in order (state, storage) use the byte-order ``"C"`` collation on PostgreSQL, which
  is what SQLite's default ``BINARY`` collation does, so paging is identical on both engines.

Full-text search structures are engine-specific and live only in the migrations: the ``transcript_fts``
FTS5 table on SQLite and the ``ix_transcript_items_fts`` GIN index on PostgreSQL (see
:func:`include_name`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from agentrunner import codec
from agentrunner.codec import JsonObject, JsonValue
from sqlalchemy import (
    BigInteger,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    TextClause,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

if TYPE_CHECKING:
    from sqlalchemy.sql.type_api import (
        _BindProcessorType,  # pyright: ignore[reportPrivateUsage]
        _ResultProcessorType,  # pyright: ignore[reportPrivateUsage]
    )

__all__ = [
    "BACKCALL_EVENT",
    "FTS_TABLE",
    "PG_FTS_INDEX",
    "PG_RESULTS_CHANNEL",
    "AgentDefinitionRow",
    "ArtifactRow",
    "BindingDefinitionRow",
    "ChangeCounterRow",
    "Base",
    "EventRow",
    "HostRequestRow",
    "HostRow",
    "IdempotencyRow",
    "JSONText",
    "ResultRow",
    "RunRow",
    "RunnerControlRow",
    "RuntimeAttachmentRow",
    "SequenceCounterRow",
    "StateRow",
    "StorageRow",
    "TranscriptRow",
    "include_name",
]

FTS_TABLE: Final = "transcript_fts"
"""SQLite FTS5 table indexing transcript text (created by the migrations, not by the metadata)."""
BACKCALL_EVENT: Final = "host.backcall"
"""Event type of a stored audit record: a back-call, or (action ``harness.tool``, caller ``harness``) a tool
a harness CLI used. Only these rows have an entry in ``ix_events_event_type_id`` (the audit query's index),
so the audit query states this literal, not a bound parameter: a planner uses a partial index only for a
query whose ``WHERE`` implies the index's, which a generic PostgreSQL plan cannot know of a parameter."""
PG_FTS_INDEX: Final = "ix_transcript_items_fts"
"""PostgreSQL GIN index over ``to_tsvector('simple', content)`` (created by the migrations)."""
PG_RESULTS_CHANNEL: Final = "agentrunner_results"
"""PostgreSQL ``NOTIFY`` channel of committed results: a statement trigger on ``run_results`` (created by the
migrations) announces ``<run_id> <last host_seq>`` for every run an insert touched, delivered at commit."""


class JSONText(TypeDecorator[JsonValue]):
    """A JSON value stored as orjson-encoded text; ``bytes`` are taken as a value already encoded (JSON has
    no bytes, so nothing else is ambiguous): results are encoded once on their way to the database."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: JsonValue | bytes, dialect: Dialect) -> str | None:
        return _dump_json(value)

    def process_result_value(self, value: str | None, dialect: Dialect) -> JsonValue:
        return None if value is None else codec.loads(value)

    def bind_processor(self, dialect: Dialect) -> _BindProcessorType[JsonValue] | None:
        # the plain function, as for results: TypeDecorator's wrapper (a closure calling
        # process_bind_param) ran for every JSON value the writer thread binds, eight per echo request
        if self.impl_instance.bind_processor(dialect) is not None:  # keep an inner processor, should one come
            return super().bind_processor(dialect)
        return _dump_json

    def result_processor(self, dialect: Dialect, coltype: object) -> _ResultProcessorType[JsonValue]:
        # the plain function instead of TypeDecorator's layered wrapper: three JSON columns per transcript
        # row are decoded on every page read (the Text impl has no processor of its own on either engine)
        return _load_json


def _dump_json(value: JsonValue | bytes) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode()
    return codec.dumps_str(value)


def _load_json(value: str | None) -> JsonValue:
    return None if value is None else codec.loads(value)


def _ordered_key(length: int) -> String:
    return String(length).with_variant(String(length, collation="C"), "postgresql")


_NAMING: Final = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


_WITH_CONVERSATION: Final = text("conversation_id IS NOT NULL")


def _partial(name: str, *columns: str, where: TextClause, unique: bool = False) -> Index:
    """An index holding only the rows that satisfy *where*, on both engines."""
    return Index(name, *columns, unique=unique, sqlite_where=where, postgresql_where=where)


class Base(DeclarativeBase):
    """Declarative base of every host table."""

    metadata = MetaData(naming_convention=_NAMING)


class SequenceCounterRow(Base):
    """The last sequence number handed out on one stream (events of a conversation, transcript of a thread).

    Used on PostgreSQL: bumped with one ``INSERT ... ON CONFLICT DO UPDATE ... RETURNING`` inside the
    writing transaction, which locks the row until commit: concurrent writers of one conversation queue up,
    and a rolled-back writer gives its numbers back, so sequences have neither gaps nor duplicates. SQLite's
    single writer takes ``MAX(seq) + 1`` inside the ``INSERT`` instead and leaves this table empty.
    """

    __tablename__ = "sequence_counters"

    stream: Mapped[str] = mapped_column(String(16), primary_key=True)
    """``event`` or ``transcript``."""
    conversation_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    """Conversation."""
    thread_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    """Thread (``""`` = main line; always ``""`` for events, numbered per conversation)."""
    last_seq: Mapped[int] = mapped_column(BigInteger)
    """Last number handed out."""


class EventRow(Base):
    """One event of the append-only event log (platform events and host records)."""

    __tablename__ = "events"
    # Partial indexes: a row gets an entry only where some query can look it up, so an event without a
    # conversation, say, writes into two b-trees fewer (an echo request's SQLite commit: 21 -> 14 WAL pages,
    # 13 with ``runs.owner_host`` unindexed). Every query of these indexes states a condition implying the
    # index's WHERE (``conversation_id = :id`` implies ``conversation_id IS NOT NULL``).
    __table_args__ = (
        # seq is NULL exactly when the conversation is, and NULLs never conflict: uniqueness is unchanged
        _partial(
            "uq_events_conversation_seq", "conversation_id", "seq", where=_WITH_CONVERSATION, unique=True
        ),
        _partial(
            "ix_events_conversation_thread_seq",
            "conversation_id",
            "thread_id",
            "seq",
            where=_WITH_CONVERSATION,
        ),
        _partial("ix_events_run_id", "run_id", where=text("run_id IS NOT NULL")),
        # the audit query pages host records of one type (``host.backcall``) in insertion order
        _partial(
            "ix_events_event_type_id", "event_type", "id", where=text(f"event_type = '{BACKCALL_EVENT}'")
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    """Insertion order across all conversations."""
    event_id: Mapped[str] = mapped_column(String(255), unique=True)
    """Idempotency key of the event."""
    event_type: Mapped[str] = mapped_column(String(200))
    """Event type."""
    source: Mapped[str] = mapped_column(String(100))
    """Producer."""
    kind: Mapped[str] = mapped_column(String(16))
    """``event`` or ``host``."""
    conversation_id: Mapped[str | None] = mapped_column(String(255))
    """Conversation, if any."""
    thread_id: Mapped[str] = mapped_column(String(255))
    """Thread (``""`` = main line)."""
    seq: Mapped[int | None] = mapped_column(BigInteger)
    """Per-conversation sequence (``NULL`` without a conversation)."""
    workspace_id: Mapped[str | None] = mapped_column(String(255))
    """Workspace."""
    bot_id: Mapped[str | None] = mapped_column(String(255))
    """Bot."""
    actor_type: Mapped[str | None] = mapped_column(String(100))
    """Actor kind."""
    actor_id: Mapped[str | None] = mapped_column(String(255))
    """Actor id."""
    subject_type: Mapped[str | None] = mapped_column(String(100))
    """Subject kind."""
    subject_id: Mapped[str | None] = mapped_column(String(255))
    """Subject id."""
    source_event_type: Mapped[str | None] = mapped_column(String(200))
    """Platform event name."""
    run_id: Mapped[str | None] = mapped_column(String(255))
    """Related run."""
    runner_id: Mapped[str | None] = mapped_column(String(255))
    """Related runner."""
    summary: Mapped[str | None] = mapped_column(Text)
    """Short text (at most 1000 characters)."""
    data: Mapped[JsonObject] = mapped_column(JSONText)
    """Small structured data."""
    event_time: Mapped[int | None] = mapped_column(BigInteger)
    """When the platform says it happened."""
    created_at: Mapped[int] = mapped_column(BigInteger)
    """When the host stored it."""


class TranscriptRow(Base):
    """One transcript item, clustered by (conversation, thread, seq) so a page is one range read."""

    __tablename__ = "transcript_items"
    __table_args__ = ({"sqlite_with_rowid": False},)

    conversation_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    """Conversation."""
    thread_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    """Thread (``""`` = main line)."""
    seq: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    """Per-thread sequence, from 1 without gaps."""
    item_id: Mapped[str] = mapped_column(String(255), unique=True)
    """Stable id (idempotency key)."""
    workspace_id: Mapped[str | None] = mapped_column(String(255))
    """Workspace."""
    role: Mapped[str] = mapped_column(String(16))
    """``user``, ``assistant``, ``system``, ``tool`` or ``event``."""
    item_type: Mapped[str] = mapped_column(String(16))
    """``message``, ``event``, ``tool_call`` or ``tool_result``."""
    event_id: Mapped[str | None] = mapped_column(String(255))
    """Event projected."""
    event_type: Mapped[str | None] = mapped_column(String(200))
    """Event type of ``event`` items."""
    run_id: Mapped[str | None] = mapped_column(String(255))
    """Producing run."""
    content: Mapped[str | None] = mapped_column(Text)
    """Plain text."""
    contents: Mapped[list[JsonValue]] = mapped_column(JSONText)
    """Structured content elements (binary parts only as artifact refs)."""
    artifacts: Mapped[list[JsonValue]] = mapped_column(JSONText)
    """Attached artifact refs."""
    meta: Mapped[JsonObject] = mapped_column("metadata", JSONText)
    """Extra data."""
    created_at: Mapped[int] = mapped_column(BigInteger)
    """Unix epoch milliseconds."""


class RunRow(Base):
    """One run: its identity, frozen authorization snapshot hash and outcome."""

    __tablename__ = "runs"

    run_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    """Run id."""
    runner_id: Mapped[str] = mapped_column(String(255))
    """Runner."""
    plugin_id: Mapped[str] = mapped_column(String(255))
    """Plugin identity."""
    binding_id: Mapped[str] = mapped_column(String(255))
    """Binding."""
    event_id: Mapped[str] = mapped_column(String(255))
    """Triggering event."""
    conversation_id: Mapped[str | None] = mapped_column(String(255))
    """Conversation."""
    thread_id: Mapped[str | None] = mapped_column(String(255))
    """Thread."""
    workspace_id: Mapped[str | None] = mapped_column(String(255))
    """Workspace."""
    status: Mapped[str] = mapped_column(String(16), index=True)
    """``running``, ``completed`` or ``failed``."""
    code: Mapped[str | None] = mapped_column(String(200))
    """Failure code."""
    message: Mapped[str | None] = mapped_column(Text)
    """Failure message."""
    snapshot: Mapped[JsonObject] = mapped_column(JSONText)
    """Frozen authorization snapshot."""
    snapshot_hash: Mapped[str] = mapped_column(String(128))
    """Its hash."""
    deadline_at: Mapped[float | None] = mapped_column(Float)
    """Deadline, as given by the orchestrator."""
    started_at: Mapped[int] = mapped_column(BigInteger)
    """Start."""
    ended_at: Mapped[int | None] = mapped_column(BigInteger)
    """End."""
    usage: Mapped[JsonObject] = mapped_column(JSONText)
    """Usage totals."""
    # not indexed: the one query on it (the runs of hosts that are gone) takes the running runs through
    # ``ix_runs_status`` and tests the owner of each; an index here cost a page write per run start
    owner_host: Mapped[str | None] = mapped_column(String(64))
    """The host incarnation executing the run (``hosts.host_id``); ``NULL`` for runs started without one."""


class ResultRow(Base):
    """One result of a run, numbered by the host (``host_seq``) for replay."""

    __tablename__ = "run_results"

    run_id: Mapped[str] = mapped_column(
        String(255), ForeignKey("runs.run_id", ondelete="CASCADE"), primary_key=True
    )
    """Run."""
    host_seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    """1-based order assigned by the host."""
    runner_sequence: Mapped[int | None] = mapped_column(Integer)
    """The runner's own ``sequence``."""
    type: Mapped[str] = mapped_column(String(100))
    """Result type."""
    payload: Mapped[JsonObject] = mapped_column(JSONText)
    """Result payload."""
    created_at: Mapped[int] = mapped_column(BigInteger)
    """Unix epoch milliseconds."""


class ArtifactRow(Base):
    """Metadata of one stored artifact; the bytes live in ``<data_dir>/artifacts/``."""

    __tablename__ = "artifacts"

    artifact_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    """Host-chosen id (random)."""
    storage_name: Mapped[str] = mapped_column(String(128))
    """Relative file name under the artifact directory (derived from the id, never from input)."""
    artifact_type: Mapped[str] = mapped_column(String(50))
    """Coarse kind."""
    mime_type: Mapped[str | None] = mapped_column(String(255))
    """MIME type."""
    name: Mapped[str | None] = mapped_column(String(255))
    """Display name."""
    size: Mapped[int] = mapped_column(BigInteger)
    """Size measured while writing."""
    sha256: Mapped[str] = mapped_column(String(64))
    """Hex digest computed while writing."""
    source: Mapped[str] = mapped_column(String(50))
    """``platform``, ``runner``, ``tool``, ``host``."""
    summary: Mapped[str | None] = mapped_column(Text)
    """Short text summary."""
    conversation_id: Mapped[str | None] = mapped_column(String(255), index=True)
    """Owning conversation."""
    run_id: Mapped[str | None] = mapped_column(String(255), index=True)
    """Owning run."""
    binding_id: Mapped[str | None] = mapped_column(String(255))
    """Owning binding."""
    workspace_id: Mapped[str | None] = mapped_column(String(255))
    """Owning workspace."""
    meta: Mapped[JsonObject] = mapped_column("metadata", JSONText)
    """Descriptive metadata."""
    created_at: Mapped[int] = mapped_column(BigInteger)
    """Unix epoch milliseconds."""
    expires_at: Mapped[int | None] = mapped_column(BigInteger, index=True)
    """Not served at or after this instant; swept by the retention job."""


class StateRow(Base):
    """One state key of one owner."""

    __tablename__ = "state_entries"

    owner_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    """SHA-256 of ``owner``."""
    key: Mapped[str] = mapped_column(_ordered_key(255), primary_key=True)
    """Key."""
    scope: Mapped[str] = mapped_column(String(32))
    """State scope."""
    owner: Mapped[str] = mapped_column(Text)
    """Canonical JSON array ``[scope, *parts]`` (collision-free)."""
    value: Mapped[str] = mapped_column(Text)
    """JSON text of the value."""
    size: Mapped[int] = mapped_column(Integer)
    """Encoded size in bytes."""
    version: Mapped[int] = mapped_column(BigInteger)
    """Bumped by every write, for compare-and-set."""
    runner_id: Mapped[str | None] = mapped_column(String(255))
    """Last writer."""
    created_at: Mapped[int] = mapped_column(BigInteger)
    """First write."""
    updated_at: Mapped[int] = mapped_column(BigInteger)
    """Last write."""


class StorageRow(Base):
    """One byte value of a plugin/workspace/binding storage area."""

    __tablename__ = "storage_entries"

    area: Mapped[str] = mapped_column(String(32), primary_key=True)
    """``plugin``, ``workspace`` or ``binding``."""
    owner_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    """Plugin, workspace or binding id."""
    key: Mapped[str] = mapped_column(_ordered_key(255), primary_key=True)
    """Key."""
    value: Mapped[bytes] = mapped_column(LargeBinary)
    """Bytes."""
    size: Mapped[int] = mapped_column(Integer)
    """Size in bytes."""
    created_at: Mapped[int] = mapped_column(BigInteger)
    """First write."""
    updated_at: Mapped[int] = mapped_column(BigInteger)
    """Last write."""


class IdempotencyRow(Base):
    """The first answer of a side-effecting call, by caller scope and idempotency key."""

    __tablename__ = "idempotency_keys"

    scope_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    """SHA-256 of ``scope``."""
    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    """Idempotency key."""
    scope: Mapped[str] = mapped_column(Text)
    """Canonical JSON array of the scope parts."""
    result: Mapped[JsonObject] = mapped_column(JSONText)
    """The first answer."""
    created_at: Mapped[int] = mapped_column(BigInteger, index=True)
    """Unix epoch milliseconds."""


class RunnerControlRow(Base):
    """An operator's switch on one runner: a row means the runner is disabled (no new run starts)."""

    __tablename__ = "runner_controls"

    runner_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    """Canonical runner id."""
    reason: Mapped[str] = mapped_column(Text)
    """Why, as the operator said it (shown in refusals)."""
    disabled_by: Mapped[str | None] = mapped_column(String(255))
    """Who disabled it (``api``, ``cli``...)."""
    disabled_at: Mapped[int] = mapped_column(BigInteger)
    """Unix epoch milliseconds."""


def include_name(name: str | None, type_: str, _parent_names: object) -> bool:
    """Alembic filter: ignore the engine-specific search structures that only the migrations create."""
    if name is None:
        return True
    if type_ == "table":
        return not name.startswith(FTS_TABLE)
    if type_ == "index":
        return name != PG_FTS_INDEX
    return True


class AgentDefinitionRow(Base):
    """One operator-managed agent (API/CLI), shared by every host on the database."""

    __tablename__ = "agent_definitions"

    agent_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    """Agent id."""
    definition: Mapped[JsonObject] = mapped_column(JSONText)
    """The agent as defined (``AgentConfig`` JSON, env references kept)."""
    updated_at: Mapped[int] = mapped_column(BigInteger)
    """Unix epoch milliseconds of the last change."""


class BindingDefinitionRow(Base):
    """One operator-managed binding spec, shared by every host on the database."""

    __tablename__ = "binding_definitions"

    binding_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    """Binding id."""
    definition: Mapped[JsonObject] = mapped_column(JSONText)
    """The binding spec as defined (``BindingSpec`` JSON)."""
    updated_at: Mapped[int] = mapped_column(BigInteger)
    """Unix epoch milliseconds of the last change."""


class ChangeCounterRow(Base):
    """A version counter bumped by every change of a shared definition set (``agents``): hosts compare it
    with the version they loaded to know they must reload (polled on SQLite, announced on PostgreSQL)."""

    __tablename__ = "change_counters"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    """What is counted (``agents``)."""
    version: Mapped[int] = mapped_column(BigInteger)
    """Bumped by every committed change."""


class HostRow(Base):
    """One running incarnation of a host process, with its heartbeat lease."""

    __tablename__ = "hosts"

    host_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    """Random id of this incarnation (a restart is a new host id)."""
    machine: Mapped[str] = mapped_column(String(255))
    """Host name of the machine (or ``[cluster] host_name``)."""
    pid: Mapped[int] = mapped_column(Integer)
    """Process id on that machine."""
    started_at: Mapped[int] = mapped_column(BigInteger)
    """Registration, Unix epoch milliseconds (database clock)."""
    heartbeat_at: Mapped[int] = mapped_column(BigInteger)
    """Last renewal, Unix epoch milliseconds (database clock)."""
    lease_expires_at: Mapped[int] = mapped_column(BigInteger, index=True)
    """The host counts as gone from this instant on, unless it renews (database clock)."""


class HostRequestRow(Base):
    """A request addressed to one host, stored so that it is not lost with a notification: the target claims
    it when told (``NOTIFY agentrunner_requests``), when its listening connection reconnects, and on a poll."""

    __tablename__ = "host_requests"

    request_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    """Random id."""
    target_host: Mapped[str] = mapped_column(String(64), index=True)
    """The host incarnation that must act (``hosts.host_id``)."""
    kind: Mapped[str] = mapped_column(String(16))
    """``cancel`` (a run the target executes) or ``start`` (an event for a runtime attached to the target)."""
    run_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    """The run to cancel."""
    body: Mapped[JsonObject | None] = mapped_column(JSONText, nullable=True)
    """What a ``start`` needs (the event and the agent id)."""
    created_at: Mapped[int] = mapped_column(BigInteger)
    """Unix epoch milliseconds."""
    claimed_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    """When the target took a ``start`` request (a claimed one is no longer withdrawn by its sender)."""
    answer: Mapped[JsonObject | None] = mapped_column(JSONText, nullable=True)
    """The target's answer to a ``start`` (the run id, or the error)."""


class RuntimeAttachmentRow(Base):
    """A remote runtime (``agentrunner-plugin --connect``) attached to one host: where events for its plugin's
    runners are sent when they reach a host without one."""

    __tablename__ = "runtime_attachments"

    plugin_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    """``author/plugin`` (the identity of the runtime's token)."""
    host_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    """The host incarnation it is connected to."""
    attached_at: Mapped[int] = mapped_column(BigInteger)
    """Unix epoch milliseconds."""
