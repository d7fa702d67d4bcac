"""Builds the event-first ``AgentRunContext`` (PROTOCOL_V1 §5, AGENT_CONTEXT_PROTOCOL §2).

The context carries the current event and handles only — never a history window. Every field a runner
branches on is filled from the event, the binding and the run's authorization snapshot.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from agentrunner import (
    AgentRunContext,
    ContentElement,
    RawEventRef,
    TextContent,
)
from agentrunner import codec as json
from pydantic import JsonValue

from agentrunner_host.definitions import AgentBinding, AgentEventEnvelope

from .authorization import AuthorizationSnapshot, snapshot_json

__all__ = ["ContextBuilder", "HistoryHandles", "is_secret_name", "session_key", "filter_params"]

_POLICY_HASHES = 1024
"""Bindings whose system-policy hash a context builder keeps (more than a host has)."""
_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
_SECRET_WORDS = frozenset(
    {
        "secret",
        "secrets",
        "token",
        "tokens",
        "password",
        "passwd",
        "pwd",
        "credential",
        "credentials",
        "apikey",
        "auth",
        "authorization",
        "cookie",
        "session_secret",
        "private",
    }
)
_SECRET_PAIRS = frozenset(
    {
        ("api", "key"),
        ("access", "key"),
        ("private", "key"),
        ("secret", "key"),
        ("signing", "key"),
        ("client", "secret"),
    }
)


_DESCRIPTOR_WORDS = frozenset(
    {"type", "mode", "method", "scheme", "kind", "algorithm", "url", "name", "enabled"}
)
"""A last word that says the field describes a credential rather than holding one (``auth-type``,
``token_url``, ``secret_name``): such names are not guessed secret. A runner's config schema still decides
for its own fields (``secret: true``)."""


def is_secret_name(name: str) -> bool:
    """Whether a parameter name looks like it holds a credential (a guess, used only where no runner schema
    says; the schema's ``secret`` markers take precedence).

    Matching is by whole words (``api_key``, ``apiKey``, ``my_token_value``, ``user_password_hash``), so
    ``keyword``, ``monkey`` or ``tokenizer_name`` are not caught by accident; names ending in a descriptor
    word (``auth-type``, ``token_url``) are not secrets.
    """
    words = [w.lower() for w in _WORD.findall(name)]
    if words and words[-1] in _DESCRIPTOR_WORDS:
        return False
    if any(w in _SECRET_WORDS for w in words):
        return True
    return any(pair in _SECRET_PAIRS for pair in itertools.pairwise(words))


def filter_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """Entry parameters safe to show a runner: no ``_``-prefixed or secret-looking names."""
    return {k: v for k, v in params.items() if not k.startswith("_") and not is_secret_name(k)}


def session_key(
    *,
    workspace_id: str | None,
    bot_id: str | None,
    binding_id: str,
    runner_id: str,
    conversation_id: str | None,
    thread_id: str | None,
) -> str:
    """A stable key for runners that keep native sessions (AGENT_CONTEXT_PROTOCOL §6)."""
    return _session_key(
        (workspace_id or "", bot_id or "", binding_id, runner_id, conversation_id or "", thread_id or "")
    )


@functools.lru_cache(maxsize=4096)
def _session_key(parts: tuple[str, str, str, str, str, str]) -> str:
    # a conversation's runs repeat their key: a look-up instead of a JSON encode and a hash per run
    return "sess_" + hashlib.sha256(json.dumps(list(parts))).hexdigest()[:32]


def _content_hash(content: object) -> str:
    return "sha256:" + hashlib.sha256(json.dumps_canonical(content)).hexdigest()


@dataclass(frozen=True, slots=True)
class HistoryHandles:
    """Where the conversation's history stands when the run starts."""

    latest_cursor: str | None = None
    """Opaque cursor after the newest transcript item."""
    transcript_seq: int | None = None
    """Seq of the newest transcript item before this run."""
    event_seq: int | None = None
    """Seq of the current event in its conversation's log."""

    @property
    def has_history_before(self) -> bool:
        """At least one earlier transcript item exists."""
        return self.transcript_seq is not None and self.transcript_seq > 0


class ContextBuilder:
    """Event + binding + snapshot → ``AgentRunContext``."""

    def __init__(self, *, host_version: str | None = None, max_event_data_bytes: int = 16 * 1024) -> None:
        self.host_version = host_version
        self.max_event_data_bytes = max_event_data_bytes
        # binding id -> (the binding, its system-policy hash); the binding is held and compared by identity, so
        # a reloaded binding (a new object) is hashed afresh and a stale entry is never answered
        self._policy_hashes: dict[str, tuple[AgentBinding, str]] = {}
        # id of a snapshot's resources JSON -> (that JSON, (its tools' hash, its own hash)); the JSON is held, so
        # its id is not reused while the entry lives
        self._hashed_resources: dict[int, tuple[dict[str, JsonValue], tuple[str, str]]] = {}

    def _system_policy_hash(self, binding: AgentBinding) -> str:
        cached = self._policy_hashes.get(binding.binding_id)
        if cached is not None and cached[0] is binding:
            return cached[1]
        secret_fields = _secret_config_fields(binding)
        digest = _content_hash({k: v for k, v in binding.runner_config.items() if k not in secret_fields})
        if len(self._policy_hashes) >= _POLICY_HASHES:
            self._policy_hashes.clear()  # bindings made per call (tests, ad-hoc runs) must not grow it forever
        self._policy_hashes[binding.binding_id] = (binding, digest)
        return digest

    def _resource_hashes(self, snapshot: AuthorizationSnapshot) -> tuple[str, str]:
        """The hashes of the run's tool schemas and of its whole resource manifest."""
        # the resources as the snapshot dumped them once (the same dump as resources.model_dump)
        resources_json = cast("dict[str, JsonValue]", snapshot_json(snapshot)["resources"])
        # The runs of one binding and event scope share their snapshot's resources JSON (SnapshotBuilder copies
        # the snapshot with its JSON, which no one changes): the same dict has the same hashes, two encodes and
        # two hashes a run saved. Compared by identity: a snapshot built afresh is hashed afresh.
        key = id(resources_json)
        cached = self._hashed_resources.get(key)
        if cached is not None and cached[0] is resources_json:
            return cached[1]
        hashes = (_content_hash(resources_json["tools"]), _content_hash(resources_json))
        if len(self._hashed_resources) >= _POLICY_HASHES:
            self._hashed_resources.clear()  # snapshots built once each (ad-hoc runs) must not grow it forever
        self._hashed_resources[key] = (resources_json, hashes)
        return hashes

    def event_data(self, event: AgentEventEnvelope) -> tuple[dict[str, JsonValue], bool]:
        """The event data to inline, and whether it was too large (the caller then keeps it as a raw ref)."""
        # most events carry no data: its size is that of "{}", known without encoding it
        size = json.json_size(event.data) if event.data else 2
        if size <= self.max_event_data_bytes:
            return dict(event.data), False
        return {"truncated": True, "size": size}, True

    def build(
        self,
        *,
        snapshot: AuthorizationSnapshot,
        binding: AgentBinding,
        event: AgentEventEnvelope,
        state: dict[str, dict[str, JsonValue]] | None = None,
        history: HistoryHandles | None = None,
        event_data: dict[str, JsonValue] | None = None,
        raw_ref: RawEventRef | None = None,
    ) -> AgentRunContext:
        """Build the context for one run.

        The context is validated once, as one nested document: a model per part (a dozen of them) cost a
        validator call and a Python ``__init__`` each, about twice the time of the one call. Parts that are
        models already (the event's actor and subject) are kept as they are, as the model constructors kept
        them; the snapshot's resources and APIs are validated from its JSON, so the runner gets its own (the
        snapshot's models are shared with later runs of its scope, see
        :class:`~agentrunner_host.authorization.SnapshotBuilder`)."""
        history = history or HistoryHandles()
        caps = snapshot.capabilities
        snapshot_document = snapshot_json(snapshot)
        data = event_data if event_data is not None else self.event_data(event)[0]

        contents: list[ContentElement] = list(event.input.contents)
        if not caps.multimodal_input:
            # Runners that did not declare multimodal input get the text parts and the artifact refs only.
            contents = [c for c in contents if isinstance(c, TextContent)]
        run_input: dict[str, object] = {
            "text": event.input.text,
            "contents": contents,
            "attachments": list(event.input.attachments),
            "message_chain": event.input.message_chain,
        }

        delivery = event.delivery
        max_size = _min_opt(delivery.max_message_size, binding.delivery_policy.max_message_size)
        delivery_ctx: dict[str, object] = {
            "surface": delivery.surface,
            "reply_target": delivery.reply_target,
            "supports_streaming": delivery.supports_streaming
            and binding.delivery_policy.streaming
            and caps.streaming,
            "supports_edit": delivery.supports_edit,
            "supports_reaction": delivery.supports_reaction,
            "max_message_size": max_size,
            "platform_capabilities": dict(delivery.platform_capabilities),
        }

        conversation: dict[str, object] | None = None
        if any((event.conversation_id, event.bot_id, event.workspace_id, event.launcher_id)):
            conversation = {
                "conversation_id": event.conversation_id,
                "thread_id": event.thread_id,
                "launcher_type": event.launcher_type,
                "launcher_id": event.launcher_id,
                "bot_id": event.bot_id,
                "workspace_id": event.workspace_id,
            }

        access: dict[str, object] = {
            "conversation_id": event.conversation_id,
            "thread_id": event.thread_id,
            "latest_cursor": history.latest_cursor if snapshot.available_apis.history_page else None,
            "event_seq": history.event_seq,
            "transcript_seq": history.transcript_seq,
            "has_history_before": history.has_history_before,
            "inline_policy": {
                "mode": "current_event",
                "delivered_count": 0,
                "messages_complete": False,
                "reason": "self_managed_context",
            },
            "available_apis": snapshot_document["available_apis"],
        }

        static_refs: dict[str, object] = {}
        if snapshot.capabilities.self_managed_context:
            tools_hash, manifest_hash = self._resource_hashes(snapshot)
            static_refs = {
                "system_policy": {"ref": "system_policy", "hash": self._system_policy_hash(binding)},
                "tool_schemas": {"ref": "tool_schemas", "hash": tools_hash},
                "resource_manifest": {"ref": "resource_manifest", "hash": manifest_hash},
            }

        params = filter_params(event.params) if event.params else None
        document: dict[str, object] = {
            "run_id": snapshot.run_id,
            "trigger": {
                "type": event.event_type,
                "source": event.source,
                "timestamp": event.event_time or time.time_ns() // 1_000_000,
            },
            "event": {
                "event_id": event.event_id,
                "event_type": event.event_type,
                "event_time": event.event_time,
                "source": event.source,
                "source_event_type": event.source_event_type,
                "raw_ref": raw_ref if raw_ref is not None else event.raw_ref,
                "data": data,
            },
            "conversation": conversation,
            "actor": event.actor,
            "subject": event.subject,
            "input": run_input,
            "delivery": delivery_ctx,
            "resources": snapshot_document["resources"],
            "context": access,
            "state": state or {},
            "runtime": {
                "host": "agentrunner",
                "langbot_version": self.host_version,
                "trace_id": snapshot.run_id,
                "deadline_at": snapshot.deadline_at,
                "locale": event.locale,
                "timezone": event.timezone,
                "static_refs": static_refs,
                "metadata": {
                    "session_key": session_key(
                        workspace_id=event.workspace_id,
                        bot_id=event.bot_id,
                        binding_id=binding.binding_id,
                        runner_id=snapshot.runner_id,
                        conversation_id=event.conversation_id,
                        thread_id=event.thread_id,
                    ),
                    "binding_id": binding.binding_id,
                    "snapshot_hash": snapshot.digest(),
                },
            },
            "config": dict(binding.runner_config),
            "adapter": {"extra": {"params": params}} if params else None,
        }
        return AgentRunContext.model_validate(document)


def _secret_config_fields(binding: AgentBinding) -> set[str]:
    return {k for k in binding.runner_config if is_secret_name(k)}


def _min_opt(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)
