"""Compatibility with legacy LangBot pipelines: configuration migration to runner ids and the pipeline
entry that turns a pipeline message into an event and a binding."""

from .migration import (
    LEGACY_RUNNERS,
    EnvReference,
    MigrationChange,
    MigrationResult,
    diff,
    expire_seconds,
    externalize_secrets,
    migrate_pipeline_config,
    redact_sources,
    resolve_runner_config,
    resolve_runner_id,
)
from .pipeline import (
    ExtensionPreferences,
    OutputSettings,
    PipelineEntry,
    PipelineEntryError,
    PipelineMessage,
    RunnerNotBoundError,
    RunnerNotConfiguredError,
    filter_query_variables,
    output_settings,
    pipeline_entry,
    scoped_event_id,
)

__all__ = [
    # migration
    "LEGACY_RUNNERS",
    "EnvReference",
    "externalize_secrets",
    "redact_sources",
    "MigrationChange",
    "MigrationResult",
    "diff",
    "expire_seconds",
    "migrate_pipeline_config",
    "resolve_runner_config",
    "resolve_runner_id",
    # pipeline entry
    "ExtensionPreferences",
    "OutputSettings",
    "PipelineEntry",
    "PipelineEntryError",
    "PipelineMessage",
    "RunnerNotBoundError",
    "RunnerNotConfiguredError",
    "filter_query_variables",
    "output_settings",
    "pipeline_entry",
    "scoped_event_id",
]
