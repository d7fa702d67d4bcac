"""Resolve a check target to a runner class: ``module:Class``, ``file.py:Class``, a plugin directory with a
``manifest.yaml``, or the id of an installed runner (entry-point group ``agentrunner.runners``)."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Final, cast

from agentrunner import AgentRunner

from .errors import TargetError

__all__ = ["ENTRY_POINT_GROUP", "load_target"]

ENTRY_POINT_GROUP: Final = "agentrunner.runners"
"""Entry-point group of installed runners: name ``author/plugin/runner``, value ``module:Class``."""


def load_target(target: str) -> type[AgentRunner]:
    """The runner class *target* names; raises :class:`TargetError` with the reason when there is none.

    A plugin directory with several runners takes ``DIR#runner-name``.
    """
    directory, _, runner_name = target.partition("#")
    if Path(directory).is_dir():
        return _from_plugin_dir(Path(directory), runner_name or None)
    if ":" in target and not target.startswith("plugin:"):
        return _from_ref(target, base_dir=None)
    return _from_entry_point(target)


def _from_ref(ref: str, *, base_dir: Path | None) -> type[AgentRunner]:
    module_name, _, attr = ref.rpartition(":")
    if not module_name or not attr:
        raise TargetError(f"{ref!r} is not of the form module:Class")
    if module_name.endswith(".py"):
        module = _import_file((base_dir or Path.cwd()) / module_name)
    else:
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise TargetError(f"cannot import {module_name!r}: {exc}") from exc
    obj: Any = module
    for part in attr.split("."):
        obj = getattr(obj, part, None)
    if not (isinstance(obj, type) and issubclass(obj, AgentRunner)):
        raise TargetError(f"{ref!r} does not name an AgentRunner subclass")
    return obj


def _import_file(path: Path) -> Any:
    path = path.resolve()
    if not path.is_file():
        raise TargetError(f"no file {path}")
    # One module name per file, so two plugins' main.py never collide in sys.modules.
    name = f"_agentrunner_conformance_{hashlib.sha256(str(path).encode()).hexdigest()[:12]}_{path.stem}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TargetError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _from_plugin_dir(directory: Path, runner_name: str | None) -> type[AgentRunner]:
    import yaml

    manifest_path = directory / "manifest.yaml"
    try:
        data: Any = yaml.safe_load(manifest_path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise TargetError(f"cannot read {manifest_path}: {exc}") from exc
    if not isinstance(data, dict):
        raise TargetError(f"{manifest_path} is not a mapping")
    manifest = cast(dict[str, Any], data)
    listed = manifest.get("runners")
    if isinstance(listed, list):
        entries = [cast(dict[str, Any], e) for e in cast(list[Any], listed) if isinstance(e, dict)]
    else:
        metadata = manifest.get("metadata")
        default = (
            cast(dict[str, Any], metadata).get("runner", "default")
            if isinstance(metadata, dict)
            else "default"
        )
        entries = [{**manifest, "name": default}]
    if runner_name is not None:
        entries = [e for e in entries if e.get("name") == runner_name]
    if len(entries) != 1:
        names = [str(e.get("name")) for e in entries]
        raise TargetError(f"{manifest_path}: name one runner with DIR#name (found {names or 'none'})")
    execution: Any = entries[0].get("execution", {})
    section: Any = cast(dict[str, Any], execution).get("python", {}) if isinstance(execution, dict) else {}
    python: dict[str, Any] = cast(dict[str, Any], section) if isinstance(section, dict) else {}
    module, path, attr = python.get("module"), python.get("path"), python.get("attr")
    if not isinstance(attr, str) or not isinstance(module or path, str):
        raise TargetError(f"{manifest_path}: execution.python needs 'module' or 'path', and 'attr'")
    for extra in (directory / "src", directory):
        if extra.is_dir() and str(extra.resolve()) not in sys.path:
            sys.path.insert(0, str(extra.resolve()))
    return _from_ref(f"{module or path}:{attr}", base_dir=directory)


def _from_entry_point(target: str) -> type[AgentRunner]:
    wanted = target.removeprefix("plugin:")
    names: list[str] = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        names.append(ep.name)
        if ep.name == wanted:
            try:
                loaded: object = ep.load()
            except Exception as exc:  # a broken installed plugin is the target's problem, reported as such
                raise TargetError(f"cannot load entry point {ep.name!r}: {exc}") from exc
            if not (isinstance(loaded, type) and issubclass(loaded, AgentRunner)):
                raise TargetError(f"entry point {ep.name!r} is not an AgentRunner subclass")
            return loaded
    raise TargetError(
        f"{target!r} is not module:Class, a plugin directory, or an installed runner (installed: {sorted(names)})"
    )
