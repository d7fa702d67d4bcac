"""The public surface of the wire protocol and of the runtime supervisor, pinned so API growth shows in a diff."""

from __future__ import annotations

import importlib
from typing import get_args

from agentrunner.wire import FRAME_KINDS, Frame, FrameAdapter

_WIRE_API = sorted(
    [
        *("CallCancelFrame", "CallEndFrame", "CallErrorFrame", "CallFrame", "CallResultFrame", "CancelFrame"),
        *(
            "ChunkFrame",
            "CreditFrame",
            "HelloFrame",
            "ListRunnersFrame",
            "PingFrame",
            "PongFrame",
            "ResultFrame",
        ),
        *("RunEndError", "RunEndFrame", "RunFrame", "RunnersFrame", "StreamCreditFrame", "WelcomeFrame"),
        *(
            "DEFAULT_RESULT_WINDOW",
            "DEFAULT_STREAM_WINDOW",
            "ENTRY_POINT_GROUP",
            "FRAME_KINDS",
            "MAX_FRAME_BYTES",
        ),
        *("WIRE_VERSION", "Frame", "FrameAdapter", "FrameChannel", "StreamFrameChannel", "PluginRuntime"),
        *(
            "WireAPITransport",
            "decode_frame",
            "encode_frame",
            "frame_from_object",
            "parse_line",
            "load_runner_class",
            "load_runners",
            "serve_stdio",
        ),
    ]
)

_RUNTIME_API = sorted(
    [
        *("CLOSED", "CRASHED", "PROTOCOL_ERROR", "START_FAILED", "UNAVAILABLE", "DEFAULT_ENV_ALLOWLIST"),
        *(
            "DiscoveryResult",
            "DiscoveryWarning",
            "MANIFEST_FILE",
            "PluginManifest",
            "PluginSpec",
            "RunnerEntry",
        ),
        *("Redactor", "RemoteRunnerConnection", "RemoteRuntimeServer", "RuntimeManager", "RuntimeOptions"),
        *("SubprocessRunnerConnection", "WireSession", "build_child_env", "default_command"),
        *("discover_entry_points", "discover_plugins", "load_plugin_dir"),
    ]
)


def _exported(module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    names: tuple[str, ...] = module.__all__
    assert len(set(names)) == len(names), f"{module_name}.__all__ has duplicates"
    assert [n for n in names if not hasattr(module, n)] == []
    return sorted(names)


def test_the_wire_package_exports_exactly_its_pinned_names() -> None:
    """agentrunner.wire.__all__ matches the pinned list and every name resolves."""
    assert _exported("agentrunner.wire") == _WIRE_API


def test_the_runtime_package_exports_exactly_its_pinned_names() -> None:
    """agentrunner_host.runtime.__all__ matches the pinned list and every name resolves."""
    assert _exported("agentrunner_host.runtime") == _RUNTIME_API


def test_every_frame_kind_has_exactly_one_model() -> None:
    """FRAME_KINDS (what decoders accept) and the Frame union (what they build) name the same kinds."""
    models = get_args(get_args(Frame)[0])
    kinds = {model.model_fields["kind"].default for model in models}
    assert kinds == FRAME_KINDS
    assert FrameAdapter.validate_python({"kind": "ping", "id": 1}).kind == "ping"
