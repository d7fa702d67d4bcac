"""Finding a plugin's runner classes: ``module:Class`` and ``path.py:Class`` references, a plugin directory's
manifest, and the ``agentrunner.runners`` entry-point group."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Iterable
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Final

from agentrunner import codec
from agentrunner.errors import RunnerDefinitionError
from agentrunner.runner import AgentRunner

__all__ = [
    "ENTRY_POINT_GROUP",
    "load_entry_point_runners",
    "load_runner_class",
    "runner_refs_from_manifest",
    "runner_refs_from_plugin_dir",
]

ENTRY_POINT_GROUP: Final = "agentrunner.runners"
"""Entry-point group of installed runners: name ``author/plugin/runner``, value ``module:Class``."""


def load_runner_class(ref: str, *, base_dir: Path | None = None) -> type[AgentRunner]:
    """Import the :class:`AgentRunner` subclass named by *ref*.

    *ref* is ``package.module:Class`` or ``path/to/file.py:Class``; a relative path is resolved against
    *base_dir* and must stay inside it. Raises :class:`RunnerDefinitionError` with the reason.
    """
    target, sep, attr = ref.rpartition(":")
    if not sep or not target or not attr:
        raise RunnerDefinitionError(
            f"runner reference {ref!r} must look like 'module:Class' or 'file.py:Class'"
        )
    if target.endswith(".py") or "/" in target:
        module = _import_path(target, base_dir=base_dir, ref=ref)
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as exc:
            raise RunnerDefinitionError(f"runner reference {ref!r}: cannot import {target!r}: {exc}") from exc
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise RunnerDefinitionError(
                f"runner reference {ref!r}: {target!r} has no attribute {attr!r}"
            ) from None
    if not (isinstance(obj, type) and issubclass(obj, AgentRunner)):
        raise RunnerDefinitionError(f"runner reference {ref!r} is not an AgentRunner subclass")
    return obj


def _import_path(target: str, *, base_dir: Path | None, ref: str) -> Any:
    base = (base_dir or Path.cwd()).resolve()
    path = (base / target).resolve()
    if base_dir is not None and not path.is_relative_to(base):
        raise RunnerDefinitionError(f"runner reference {ref!r} points outside the plugin directory {base}")
    if not path.is_file():
        raise RunnerDefinitionError(f"runner reference {ref!r}: no file {path}")
    # A stable, unique module name per file, so two plugins' main.py never collide in sys.modules.
    name = f"_agentrunner_plugin_{hashlib.sha256(str(path).encode()).hexdigest()[:16]}_{path.stem}"
    existing = sys.modules.get(name)
    if existing is not None:
        return existing
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise RunnerDefinitionError(f"runner reference {ref!r}: cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def runner_refs_from_manifest(manifest: dict[str, Any]) -> list[str]:
    """The ``execution.python`` references of a decoded plugin manifest (both the one-runner and the
    ``runners:`` forms of ``docs/wire.md``)."""
    listed = manifest.get("runners")
    entries: list[Any] = listed if isinstance(listed, list) else [manifest]  # pyright: ignore[reportUnknownVariableType]
    refs: list[str] = []
    for entry in entries:
        python = _mapping(_mapping(_mapping(entry).get("execution")).get("python"))
        target = python.get("module") or python.get("path")
        attr = python.get("attr")
        if not isinstance(target, str) or not isinstance(attr, str):
            raise RunnerDefinitionError("manifest runner needs execution.python.{module|path} and .attr")
        refs.append(f"{target}:{attr}")
    return refs


def _mapping(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}  # pyright: ignore[reportUnknownVariableType]


def runner_refs_from_plugin_dir(plugin_dir: Path) -> list[str]:
    """The runner references declared by ``manifest.yaml`` (needs PyYAML) or ``manifest.json`` in *plugin_dir*."""
    yaml_path = plugin_dir / "manifest.yaml"
    json_path = plugin_dir / "manifest.json"
    if yaml_path.is_file():
        try:
            yaml: Any = importlib.import_module("yaml")
        except ImportError:
            raise RunnerDefinitionError(
                f"{yaml_path}: reading a YAML manifest needs PyYAML; pass --runner instead"
            ) from None
        data: Any = yaml.safe_load(yaml_path.read_text(encoding="utf-8"))
    elif json_path.is_file():
        data = codec.loads(json_path.read_bytes())
    else:
        raise RunnerDefinitionError(f"{plugin_dir} has no manifest.yaml or manifest.json")
    if not isinstance(data, dict):
        raise RunnerDefinitionError(f"the manifest in {plugin_dir} is not a mapping")
    return runner_refs_from_manifest(data)  # pyright: ignore[reportUnknownArgumentType]


def load_entry_point_runners(*, plugin_id: str | None = None) -> list[type[AgentRunner]]:
    """Runner classes of the ``agentrunner.runners`` group, only those named ``plugin_id/...`` when given."""
    classes: list[type[AgentRunner]] = []
    prefix = None if plugin_id is None else plugin_id.rstrip("/") + "/"
    selected: Iterable[Any] = entry_points(group=ENTRY_POINT_GROUP)
    for ep in selected:
        if prefix is not None and not str(ep.name).startswith(prefix):
            continue
        classes.append(load_runner_class(str(ep.value)))
    return classes
