"""What the external-harness runners share (runner-requirements §b.7).

:func:`run_harness` runs one event through a CLI described by a :class:`HarnessAdapter`:
:class:`HarnessProcess` holds the process rules (own group, stdin closed, capped concurrent reads, tree kill,
rlimits), :mod:`.workspace` the allowlisted working directories, :mod:`.projection` the context files and
skills, :mod:`.environment` the CLI's environment. Runners import from here only.
"""

from .driver import (
    HOST_BRIDGE_METADATA_KEY,
    NATIVE_LOG_CAP,
    SESSION_ID_KEY,
    WORKING_DIRECTORY_KEY,
    BridgeHandle,
    HarnessAdapter,
    HarnessPlan,
    Invocation,
    run_harness,
)
from .environment import BASE_ENV_ALLOWLIST, build_environment, parse_environment_json, redact
from .errors import FAILURE_KINDS, FailureKind, HarnessFailure
from .jsonvalues import as_list, as_object
from .mcp_pins import MCPServerPin, check_mcp_server, parse_pins
from .native import (
    NativeEvent,
    NativeParser,
    NativeResult,
    NativeSession,
    NativeText,
    NativeToolCompleted,
    NativeToolStarted,
    NativeUnknown,
)
from .pinned_config import check_pinned_config
from .process import (
    DEFAULT_STDERR_TAIL,
    DEFAULT_STDOUT_CAP,
    HarnessProcess,
    OutputTooLargeError,
    ProcessLimits,
)
from .projection import (
    CONTEXT_FILE,
    CONTEXT_MARKDOWN_FILE,
    CONTEXT_SCHEMA,
    ProjectedSkill,
    SkillPin,
    SkillSpec,
    context_document,
    parse_skill_pins,
    parse_skills,
    project_skills,
    prompt_text,
    skill_digest,
    verify_skills,
    write_context,
)
from .settings import (
    DEFAULT_CONTEXT_DIRECTORY,
    DEFAULT_TIMEOUT_SECONDS,
    HarnessSettings,
    config_bool,
    config_int,
    config_str,
)
from .workspace import (
    HARNESS_METADATA_KEY,
    WORKSPACE_MARKER,
    WorkspaceLease,
    WorkspacePolicy,
    context_directory,
    ensure_private_dir,
    resolve_working_directory,
    run_directory,
)

__all__ = [
    # the run
    "run_harness",
    "HarnessAdapter",
    "HarnessPlan",
    "Invocation",
    "BridgeHandle",
    "HOST_BRIDGE_METADATA_KEY",
    "SESSION_ID_KEY",
    "WORKING_DIRECTORY_KEY",
    "NATIVE_LOG_CAP",
    # settings
    "HarnessSettings",
    "DEFAULT_CONTEXT_DIRECTORY",
    "DEFAULT_TIMEOUT_SECONDS",
    "config_bool",
    "config_int",
    "config_str",
    # native output
    "NativeEvent",
    "NativeParser",
    "NativeResult",
    "NativeSession",
    "NativeText",
    "NativeToolCompleted",
    "NativeToolStarted",
    "NativeUnknown",
    # process
    "HarnessProcess",
    "ProcessLimits",
    "OutputTooLargeError",
    "DEFAULT_STDOUT_CAP",
    "DEFAULT_STDERR_TAIL",
    # workspace and projection
    "HARNESS_METADATA_KEY",
    "WORKSPACE_MARKER",
    "WorkspaceLease",
    "WorkspacePolicy",
    "MCPServerPin",
    "check_mcp_server",
    "check_pinned_config",
    "parse_pins",
    "resolve_working_directory",
    "context_directory",
    "run_directory",
    "ensure_private_dir",
    "CONTEXT_SCHEMA",
    "CONTEXT_FILE",
    "CONTEXT_MARKDOWN_FILE",
    "context_document",
    "write_context",
    "prompt_text",
    "SkillSpec",
    "SkillPin",
    "ProjectedSkill",
    "parse_skills",
    "parse_skill_pins",
    "project_skills",
    "skill_digest",
    "verify_skills",
    # environment
    "BASE_ENV_ALLOWLIST",
    "build_environment",
    "parse_environment_json",
    "redact",
    # decoded JSON
    "as_object",
    "as_list",
    # errors
    "HarnessFailure",
    "FailureKind",
    "FAILURE_KINDS",
]
