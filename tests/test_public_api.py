"""The public surface of each workspace package, pinned so that API growth shows up in a diff.

Each package gets one test comparing its ``__all__`` with a literal sorted list. When you add or remove a public
name on purpose, update the list in the same change. To pin another package, add a ``_<PACKAGE>_API`` list and
one ``test_<package>_public_api_is_pinned`` test that calls :func:`_assert_pinned`.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

_REPO = Path(__file__).resolve().parents[1]


def _assert_pinned(module_name: str, expected: list[str]) -> None:
    assert expected == sorted(expected), "keep the pinned list sorted"
    module = importlib.import_module(module_name)
    exported: tuple[str, ...] | list[str] = module.__all__
    assert len(set(exported)) == len(exported), f"{module_name}.__all__ has duplicates"
    assert sorted(exported) == expected
    # `from <module> import <name>` is getattr on the module: every pinned name must resolve.
    missing = [name for name in exported if not hasattr(module, name)]
    assert missing == [], f"{module_name}.__all__ names what it does not define: {missing}"


_SDK_API = [
    "ACTIONS",
    "APIError",
    "APITransport",
    "ActionRequestedData",
    "ActionRequestedResult",
    "ActionSpec",
    "ActorContext",
    "AdapterContext",
    "AgentAPIError",
    "AgentEventContext",
    "AgentInput",
    "AgentResources",
    "AgentRunAPI",
    "AgentRunContext",
    "AgentRunRequest",
    "AgentRunResult",
    "AgentRunResultAdapter",
    "AgentRunState",
    "AgentRunner",
    "AgentRunnerCapabilities",
    "AgentRunnerContextPolicy",
    "AgentRunnerError",
    "AgentRunnerManifest",
    "AgentRunnerPermissions",
    "AgentRuntimeContext",
    "AgentTrigger",
    "ArtifactChunk",
    "ArtifactCreatedData",
    "ArtifactCreatedResult",
    "ArtifactMetadata",
    "ArtifactRef",
    "AssistantMessage",
    "AssistantMessageChunk",
    "AudioContent",
    "BackCallRequest",
    "ChatMessage",
    "ContentElement",
    "ContextAPICapabilities",
    "ContextAccess",
    "ConversationContext",
    "DeadlineExceededError",
    "DeliveryContext",
    "DynamicFormItemSchema",
    "EventPage",
    "EventRecord",
    "FileContent",
    "FileResource",
    "FormOption",
    "HistoryPage",
    "I18nObject",
    "ImageContent",
    "InlineContextPolicy",
    "InvalidArgumentError",
    "InvalidRunnerIdError",
    "KNOWN_RESULT_TYPES",
    "KnowledgeBaseResource",
    "KnowledgeHit",
    "KnowledgeRetrieveResult",
    "ListAgentRunnersResponse",
    "MAX_STATE_VALUE_BYTES",
    "MessageCompletedData",
    "MessageCompletedResult",
    "MessageDeltaData",
    "MessageDeltaResult",
    "ModelAuthFailedError",
    "ModelResource",
    "ModelResponse",
    "ModelStreamChunk",
    "ModelToolCall",
    "ModelUsage",
    "NotFoundError",
    "PROTOCOL_VERSION",
    "ParsedResult",
    "PayloadTooLargeError",
    "PlatformActionReceipt",
    "ProtocolError",
    "RateLimitedError",
    "RawEventRef",
    "RerankItem",
    "RerankResult",
    "ResultEmitter",
    "RunCompletedData",
    "RunCompletedResult",
    "RunFailedData",
    "RunFailedResult",
    "RunnerDefinitionError",
    "RunnerId",
    "RuntimeAPIError",
    "STATE_SCOPES",
    "StateEntry",
    "StateListPage",
    "StateScope",
    "StateUpdatedData",
    "StateUpdatedResult",
    "StateValue",
    "StaticContextRef",
    "StorageEntry",
    "StorageListPage",
    "StorageResource",
    "StorageValue",
    "SubjectContext",
    "TERMINAL_RESULT_TYPES",
    "TextContent",
    "ToolCallCompletedData",
    "ToolCallCompletedResult",
    "ToolCallResult",
    "ToolCallStartedData",
    "ToolCallStartedResult",
    "ToolDetail",
    "ToolResource",
    "TranscriptItem",
    "UnauthorizedError",
    "UnknownResult",
    "is_compatible_protocol",
    "parse_result",
]


def test_sdk_public_api_is_pinned() -> None:
    """``agentrunner.__all__`` is exactly the pinned list, and every name in it can be imported."""
    _assert_pinned("agentrunner", _SDK_API)


_HOST_API = [
    "AgentBinding",
    "AgentConfig",
    "AgentEventEnvelope",
    "AuditRecord",
    "AuthorizationSnapshot",
    "BackCallDispatcher",
    "BackCallHandler",
    "BindingConflictError",
    "BindingNotFoundError",
    "BindingScope",
    "BindingSet",
    "CodeExecutionDisabledError",
    "ConfigurationError",
    "ContextBuilder",
    "ConversationKey",
    "DeliveredResult",
    "DeliveryPolicy",
    "DuplicateEventError",
    "EventFilter",
    "HistoryHandles",
    "Host",
    "HostError",
    "InProcessConnection",
    "InProcessTransport",
    "KnowledgeProvider",
    "ModelProvider",
    "Orchestrator",
    "PluginFailure",
    "RawResult",
    "RegistryWarning",
    "ResourceCatalog",
    "ResourcePolicy",
    "ResourceSelection",
    "RunAccess",
    "RunHandle",
    "RunNotFoundError",
    "RunOutcome",
    "RunPolicy",
    "RunnerConnection",
    "RunnerDescriptor",
    "RunnerDisabledError",
    "RunnerNotFoundError",
    "RunnerRegistry",
    "RunnerTransportError",
    "RunnerUnavailableError",
    "SelectorRegistry",
    "SnapshotBuilder",
    "StateOwner",
    "StatePolicy",
    "StorageOwner",
    "ToolProvider",
    "default_selectors",
]


def test_host_public_api_is_pinned() -> None:
    """``agentrunner_host`` exports exactly the pinned names."""
    _assert_pinned("agentrunner_host", _HOST_API)


_STORES_API = [
    "AGENTS_CHANNEL",
    "AgentStore",
    "AppendOutcome",
    "ArtifactOwner",
    "ArtifactRecord",
    "ArtifactStore",
    "ArtifactUnavailableError",
    "AuditEntry",
    "AuditFilter",
    "AuditLog",
    "AuditPage",
    "BACKCALL_EVENT",
    "DEFAULT_ARTIFACT_MAX_BYTES",
    "DEFAULT_FLUSH_WINDOW",
    "DEFAULT_STORAGE_MAX_BYTES",
    "DefinitionSet",
    "DefinitionsChangedError",
    "DuplicateEventStoredError",
    "EventEntry",
    "EventKind",
    "EventLog",
    "HOST_RESTARTED",
    "HostRecord",
    "HostRequest",
    "HostRequestStore",
    "HostStore",
    "HostStores",
    "IdempotencyStore",
    "InvalidValueError",
    "MAX_AUDIT_PAGE",
    "MAX_SEARCH_TOP_K",
    "MAX_SUMMARY_CHARS",
    "RequestKind",
    "ResultLog",
    "ResultLogError",
    "ResultRecord",
    "Role",
    "RunExistsError",
    "RunFinish",
    "RunListFilter",
    "RunRecord",
    "RunStart",
    "RunStateError",
    "RunStatus",
    "RunStore",
    "RunnerControl",
    "RunnerControlStore",
    "StartFacts",
    "StartPlan",
    "StartReads",
    "StateItem",
    "StateKey",
    "StateStore",
    "StateTTL",
    "StateVersionConflict",
    "StateWrite",
    "StorageItem",
    "StorageKey",
    "StorageStore",
    "StoreError",
    "StoredEvent",
    "StoredTranscriptItem",
    "Transcript",
    "TranscriptEntry",
    "TranscriptItemType",
    "ValueTooLargeError",
]


def test_host_stores_public_api_is_pinned() -> None:
    """``agentrunner_host.stores`` exports exactly the pinned names."""
    _assert_pinned("agentrunner_host.stores", _STORES_API)


_CLUSTER_API = [
    "KEEPALIVE_SECONDS",
    "MAX_RECONNECT_DELAY",
    "Membership",
    "Notifications",
    "default_machine_name",
]


def test_host_cluster_public_api_is_pinned() -> None:
    """``agentrunner_host.cluster`` exports exactly the pinned names."""
    _assert_pinned("agentrunner_host.cluster", _CLUSTER_API)


_CONSOLE_API = [
    "ConsolePage",
    "ConsoleState",
    "NavEntry",
    "PAGES",
    "PAGE_HEADERS",
    "PUBLIC_PATHS",
    "PUBLIC_PREFIXES",
    "console_routes",
    "console_state",
    "render",
]


def test_host_console_public_api_is_pinned() -> None:
    _assert_pinned("agentrunner_host.http.console", _CONSOLE_API)


_SERVICE_API = [
    "AGENTS_FILE_NAME",
    "AgentDirectory",
    "AgentEntry",
    "AlreadyExistsError",
    "BindingEntry",
    "DEFAULT_AGENT_ID",
    "DEFAULT_BINDING_ID",
    "HostService",
    "InUseError",
    "InvalidDefinitionError",
    "NotFoundError",
    "ReadOnlyError",
    "ReplayItem",
    "ResultBatch",
    "RunFeed",
    "RunView",
    "Source",
    "stored_run_view",
]


def test_host_service_public_api_is_pinned() -> None:
    """``agentrunner_host.service`` exports exactly the pinned names."""
    _assert_pinned("agentrunner_host.service", _SERVICE_API)


_MCP_API = [
    "BridgeClosedError",
    "BridgeEndpoint",
    "BridgeError",
    "BridgeNotStartedError",
    "BridgeServer",
    "CLAUDE_CONFIG_FILE",
    "CODEX_CONFIG_FILE",
    "DEFAULT_SERVER_NAME",
    "ExternalMCPBridge",
    "HOST_BRIDGE_METADATA_KEY",
    "HarnessTransport",
    "NonLoopbackBindError",
    "PROXY_TOKEN_ENV",
    "PROXY_URL_ENV",
    "RunRegistration",
    "create_external_mcp_bridge",
    "host_endpoint",
]


def test_mcp_bridge_public_api_is_pinned() -> None:
    """``agentrunner_mcp`` exports exactly the pinned names."""
    _assert_pinned("agentrunner_mcp", _MCP_API)


_HARNESS_KIT_API = [
    "BASE_ENV_ALLOWLIST",
    "BridgeHandle",
    "CONTEXT_FILE",
    "CONTEXT_MARKDOWN_FILE",
    "CONTEXT_SCHEMA",
    "DEFAULT_CONTEXT_DIRECTORY",
    "DEFAULT_STDERR_TAIL",
    "DEFAULT_STDOUT_CAP",
    "DEFAULT_TIMEOUT_SECONDS",
    "FAILURE_KINDS",
    "FailureKind",
    "HARNESS_METADATA_KEY",
    "HOST_BRIDGE_METADATA_KEY",
    "HarnessAdapter",
    "HarnessFailure",
    "HarnessPlan",
    "HarnessProcess",
    "HarnessSettings",
    "Invocation",
    "MCPServerPin",
    "NATIVE_LOG_CAP",
    "NativeEvent",
    "NativeParser",
    "NativeResult",
    "NativeSession",
    "NativeText",
    "NativeToolCompleted",
    "NativeToolStarted",
    "NativeUnknown",
    "OutputTooLargeError",
    "ProcessLimits",
    "ProjectedSkill",
    "SESSION_ID_KEY",
    "SkillPin",
    "SkillSpec",
    "WORKING_DIRECTORY_KEY",
    "WORKSPACE_MARKER",
    "WorkspaceLease",
    "WorkspacePolicy",
    "as_list",
    "as_object",
    "build_environment",
    "check_mcp_server",
    "check_pinned_config",
    "config_bool",
    "config_int",
    "config_str",
    "context_directory",
    "context_document",
    "ensure_private_dir",
    "parse_environment_json",
    "parse_pins",
    "parse_skill_pins",
    "parse_skills",
    "project_skills",
    "prompt_text",
    "redact",
    "resolve_working_directory",
    "run_directory",
    "run_harness",
    "skill_digest",
    "verify_skills",
    "write_context",
]


def test_harness_kit_public_api_is_pinned() -> None:
    """``agentrunner_harness`` exports exactly the pinned names."""
    _assert_pinned("agentrunner_harness", _HARNESS_KIT_API)


_CLAUDE_CODE_API = [
    "ClaudeCodeAdapter",
    "ClaudeCodeRunner",
    "ClaudeOutputFormat",
    "ClaudeParser",
    "ClaudeSettings",
    "MANIFEST",
    "PREFIX",
    "RUNNER_ID",
]


def test_claude_code_public_api_is_pinned() -> None:
    """``agentrunner_runner_claude_code`` exports exactly the pinned names."""
    _assert_pinned("agentrunner_runner_claude_code", _CLAUDE_CODE_API)


_CODEX_API = [
    "API_KEY_ENV",
    "CodexAdapter",
    "CodexParser",
    "CodexRunner",
    "CodexSettings",
    "MANIFEST",
    "PREFIX",
    "RUNNER_ID",
]


def test_codex_public_api_is_pinned() -> None:
    """``agentrunner_runner_codex`` exports exactly the pinned names."""
    _assert_pinned("agentrunner_runner_codex", _CODEX_API)


# The SDK's submodules other packages may import from: each has its own curated ``__all__``, pinned here
# (``agentrunner`` itself is pinned above, ``agentrunner.wire`` in tests/runtime/test_runtime_public_api.py).
# Every other SDK module is an implementation detail re-exported by ``agentrunner``.
_SDK_SUBMODULE_APIS: dict[str, list[str]] = {
    "agentrunner.codec": [
        "JsonObject",
        "JsonValue",
        "WireObject",
        "dumps",
        "dumps_canonical",
        "dumps_str",
        "json_size",
        "loads",
        "loads_object",
        "non_finite_path",
    ],
    "agentrunner.actions": [
        "ACTIONS",
        "ActionSpec",
        "ArtifactIdParams",
        "ArtifactReadParams",
        "BackCallRequest",
        "EmptyParams",
        "EmptyResult",
        "EventGetParams",
        "EventPageParams",
        "HistoryPageParams",
        "HistorySearchParams",
        "KnowledgeListResult",
        "KnowledgeRetrieveParams",
        "ModelInvokeParams",
        "ModelRerankParams",
        "PlatformActionParams",
        "StateDeleteParams",
        "StateGetParams",
        "StateListParams",
        "StateSetParams",
        "StorageArea",
        "StorageDeleteParams",
        "StorageGetParams",
        "StorageListParams",
        "StorageSetParams",
        "ToolCallParams",
        "ToolDetailParams",
    ],
    "agentrunner.api_types": [
        "ArtifactChunk",
        "ArtifactMetadata",
        "ChatMessage",
        "EventPage",
        "EventRecord",
        "HistoryPage",
        "KnowledgeBaseInfo",
        "KnowledgeHit",
        "KnowledgeRetrieveResult",
        "ModelResponse",
        "ModelStreamChunk",
        "ModelToolCall",
        "ModelUsage",
        "PlatformActionReceipt",
        "RerankItem",
        "RerankResult",
        "StateEntry",
        "StateListPage",
        "StateValue",
        "StorageEntry",
        "StorageListPage",
        "StorageValue",
        "ToolCallResult",
        "ToolDetail",
        "TranscriptItem",
    ],
    "agentrunner.context": [
        "ActorContext",
        "AdapterContext",
        "AgentEventContext",
        "AgentInput",
        "AgentRunContext",
        "AgentRunRequest",
        "AgentRunState",
        "AgentRuntimeContext",
        "AgentTrigger",
        "ContextAPICapabilities",
        "ContextAccess",
        "ConversationContext",
        "DeliveryContext",
        "InlineContextPolicy",
        "SubjectContext",
        "TriggerSource",
    ],
    "agentrunner.errors": [
        "APIError",
        "API_ERROR_CODES",
        "AgentAPIError",
        "AgentRunnerError",
        "DeadlineExceededError",
        "ErrorCode",
        "InvalidArgumentError",
        "ModelAuthFailedError",
        "NotFoundError",
        "PayloadTooLargeError",
        "ProtocolError",
        "RateLimitedError",
        "RunnerDefinitionError",
        "RuntimeAPIError",
        "UnauthorizedError",
    ],
    "agentrunner.external_tools": [
        "CurrentEventArgs",
        "CurrentEventSnapshot",
        "EXTERNAL_TOOLS",
        "ExposedTool",
        "ExternalTool",
        "MAX_EXPOSED_NAME_LENGTH",
        "current_event_snapshot",
        "external_tool",
        "host_tool_exposed_name",
        "invoke_exposed_tool",
        "run_tool_surface",
    ],
    "agentrunner.results": [
        "ActionRequestedData",
        "ActionRequestedResult",
        "AgentRunResult",
        "AgentRunResultAdapter",
        "AgentRunResultBase",
        "ArtifactCreatedData",
        "ArtifactCreatedResult",
        "AssistantMessage",
        "AssistantMessageChunk",
        "KNOWN_RESULT_TYPES",
        "MAX_STATE_VALUE_BYTES",
        "MessageCompletedData",
        "MessageCompletedResult",
        "MessageDeltaData",
        "MessageDeltaResult",
        "ParsedResult",
        "ResultType",
        "RunCompletedData",
        "RunCompletedResult",
        "RunFailedData",
        "RunFailedResult",
        "STATE_SCOPES",
        "StateScope",
        "StateUpdatedData",
        "StateUpdatedResult",
        "TERMINAL_RESULT_TYPES",
        "ToolCallCompletedData",
        "ToolCallCompletedResult",
        "ToolCallStartedData",
        "ToolCallStartedResult",
        "UnknownResult",
        "parse_result",
    ],
    "agentrunner.process_group": [
        "ProcessGroup",
    ],
    "agentrunner.schema": [
        "DEFAULT_SCHEMA_DIR",
        "JSON_SCHEMA_DIALECT",
        "check",
        "generate",
        "main",
        "write",
    ],
    "agentrunner.testing": [
        "DEFAULT_STATE_SCOPES",
        "DEFAULT_STORAGE_AREAS",
        "FakeCall",
        "FakeHost",
        "Handler",
        "MAX_STORAGE_VALUE_BYTES",
        "RunOutcome",
        "StreamRuleError",
        "collect",
        "make_context",
        "stream_problems",
    ],
    "agentrunner.wire.websocket": [
        "TOKEN_ENV",
        "WebSocketFrameChannel",
        "serve_websocket",
    ],
}
_SDK_PUBLIC_MODULES = {"agentrunner", "agentrunner.wire", *_SDK_SUBMODULE_APIS}


def test_sdk_public_submodules_are_pinned() -> None:
    """Each public SDK submodule exports exactly its pinned names."""
    for module_name, expected in _SDK_SUBMODULE_APIS.items():
        _assert_pinned(module_name, expected)


def _sdk_imports_outside_the_sdk() -> list[tuple[str, str, str]]:
    """``(file, module, name)`` for every import of an SDK module by a file that is not part of the SDK."""
    found: list[tuple[str, str, str]] = []
    for root in ("packages", "runners", "tests", "bench"):
        for path in sorted((_REPO / root).rglob("*.py")):
            relative = path.relative_to(_REPO).as_posix()
            if relative.startswith("packages/sdk/") or "/.venv/" in relative:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    if node.module == "agentrunner" or node.module.startswith("agentrunner."):
                        found += [(relative, node.module, alias.name) for alias in node.names]
                elif isinstance(node, ast.Import):
                    for alias in node.names:
                        if alias.name.startswith("agentrunner."):
                            module, _, name = alias.name.rpartition(".")
                            found.append((relative, module, name))
    return found


def test_other_packages_import_only_public_sdk_names() -> None:
    """Outside the SDK, every SDK import names a public module and a name in its ``__all__`` (or a public
    submodule): the SDK's real surface is the one pinned above, not whatever happens to be importable."""
    wrong: list[str] = []
    for file, module, name in _sdk_imports_outside_the_sdk():
        if module not in _SDK_PUBLIC_MODULES:
            wrong.append(f"{file}: {module} is not a public SDK module")
        elif (
            name not in importlib.import_module(module).__all__
            and f"{module}.{name}" not in _SDK_PUBLIC_MODULES
        ):
            wrong.append(f"{file}: {module}.{name} is not in {module}.__all__")
    assert wrong == []
