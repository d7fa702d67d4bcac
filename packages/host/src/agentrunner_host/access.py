"""``RunAccess``: the slice of a run's frozen authorization snapshot that data access is scoped by.

The dispatcher decides *whether* an action is allowed (from the snapshot); the pull APIs and the stores then
use ``RunAccess`` to decide *what* the run may see: its conversation and thread, its state owners, its
storage areas. Every store call takes the scope explicitly; nothing is ambient.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agentrunner import StateScope

__all__ = ["ConversationKey", "RunAccess", "StateOwner", "StorageOwner"]


@dataclass(frozen=True, slots=True)
class ConversationKey:
    """A conversation (and optionally one thread of it) inside a workspace."""

    conversation_id: str
    """Conversation id."""
    thread_id: str | None = None
    """Thread id; ``None`` = the conversation's main line."""
    workspace_id: str | None = None
    """Workspace the conversation belongs to."""


@dataclass(frozen=True, slots=True)
class StateOwner:
    """Who a state entry belongs to: a scope plus the structured identity of its owner.

    ``parts`` is a tuple, never a joined string, so ``("a:b",)`` and ``("a", "b")`` can never collide.
    Every owner is namespaced by runner and binding except ``workspace``, which is shared by the workspace.
    """

    scope: StateScope
    """State scope."""
    parts: tuple[str, ...]
    """Owner identity, e.g. ``(runner_id, binding_id, conversation_id, thread_id or "")``."""


@dataclass(frozen=True, slots=True)
class StorageOwner:
    """Who a storage area belongs to: ``plugin`` (plugin id), ``workspace`` (workspace id) or ``binding``."""

    area: str
    """``plugin``, ``workspace`` or ``binding``."""
    owner_id: str
    """Plugin id, workspace id or binding id."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunAccess:
    """What one live run may read and write, derived once from its authorization snapshot."""

    run_id: str
    """The run."""
    runner_id: str
    """Its runner."""
    plugin_id: str
    """Its plugin identity (``author/plugin``)."""
    binding_id: str
    """Its binding."""
    event_id: str
    """The event that started it."""
    conversation: ConversationKey | None
    """The run's own conversation, when the event has one."""
    readable_conversations: frozenset[str] = field(default_factory=frozenset[str])
    """Other conversation ids this run was explicitly granted to read (needs a permission *and* a binding
    policy); empty by default."""
    state_owners: dict[str, StateOwner] = field(default_factory=dict[str, StateOwner])
    """Granted state scopes → the owner each scope resolves to for this run."""
    storage_owners: dict[str, StorageOwner] = field(default_factory=dict[str, StorageOwner])
    """Granted storage areas → owner."""
    artifact_ids: frozenset[str] = field(default_factory=frozenset[str])
    """Artifacts granted by id beyond the conversation rule (configured files, input attachments)."""
