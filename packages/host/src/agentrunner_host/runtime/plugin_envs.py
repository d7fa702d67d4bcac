"""Installed plugins: each in its own virtual environment, made with uv, recorded under the data directory.

``agentrunner plugins install SOURCE`` takes a plugin directory (a ``manifest.yaml``, and a ``pyproject.toml``
naming its dependencies), a wheel, or a requirement (``acme-agent==1.2``). It creates a fresh environment with
the host's Python, installs the plugin there with the host's own SDK (repackaged from the host's installed
files, so the plugin's runtime speaks exactly the host's protocol), pins what was installed, starts the
plugin's runtime once to check it loads, and only then records it::

    <data_dir>/plugins/<author>--<name>/
        plugin.json          the record: version, source, generation, runners, pinned requirements
        status.json          the last discovery of a server: when, and the error if it failed
        g<N>/env/            generation N's environment (the runtime runs g<N>/env/bin/python)
        g<N>/src/            the copy of a plugin directory (installs from a directory only)

An upgrade installs generation N+1 next to N and switches the record; a running server starts new runs on
the new generation and closes the old process once its live runs ended. The previous generation is kept
(a server may still drain it); older ones are removed. The host's own environment is never modified: uv is
always pointed at the plugin's environment (``--python``) and never reads a project configuration.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import fcntl
import hashlib
import importlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
import time
import uuid
import zipfile
from collections.abc import AsyncIterator, Callable, Generator, Sequence
from pathlib import Path
from typing import Any, Final, Literal

from agentrunner import (
    AgentRunnerManifest,
    BackCallRequest,
    InvalidRunnerIdError,
    RunnerId,
    UnauthorizedError,
)
from agentrunner import codec as json
from agentrunner.wire import ENTRY_POINT_GROUP
from pydantic import BaseModel, ConfigDict, ValidationError

from agentrunner_host.errors import HostError

from .discovery import MANIFEST_FILE, PluginSpec, RunnerEntry, load_plugin_dir

__all__ = [
    "PLUGINS_DIR",
    "InstalledPlugin",
    "InstalledRunner",
    "PluginInstallError",
    "PluginStatus",
    "check_loads",
    "find_uv",
    "host_sdk_wheel",
    "install_plugin",
    "installed_plugins",
    "plugin_status",
    "record_status",
    "remove_plugin",
    "runner_manifests",
]

PLUGINS_DIR: Final = "plugins"
"""Directory of the data directory that holds installed plugins."""
_RECORD: Final = "plugin.json"
_STATUS: Final = "status.json"
_SDK_DIST: Final = "agentrunner-sdk"
_COPY_IGNORE = shutil.ignore_patterns(
    ".venv", "venv", "__pycache__", "*.pyc", ".git", "dist", "build", ".*cache"
)

SourceKind = Literal["directory", "wheel", "requirement"]


class PluginInstallError(HostError):
    """A plugin could not be installed, upgraded or removed; the message says why (uv's own words included)."""


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class InstalledRunner(_Record):
    """One runner of an installed plugin."""

    name: str
    """Runner name inside the plugin."""
    ref: str
    """Class reference for the runtime (``module:Class`` or ``file.py:Class``)."""


class InstalledPlugin(_Record):
    """The record of an installed plugin (``plugin.json``)."""

    plugin_id: str
    """``author/plugin``."""
    version: str | None = None
    """The plugin's version (its manifest's, else its distribution's)."""
    kind: SourceKind
    """What it was installed from."""
    source: str
    """The directory, wheel or requirement given to ``plugins install``."""
    generation: int
    """Incremented by every install of this plugin id; names the ``g<N>`` directory."""
    runners: list[InstalledRunner]
    """Its runners."""
    requirements: list[str] = []
    """Everything installed in its environment, pinned (``uv pip freeze``)."""
    installed_at: int
    """Unix epoch milliseconds."""
    home: str
    """The plugin's directory under ``<data_dir>/plugins``."""

    @property
    def generation_dir(self) -> Path:
        """``g<N>`` of the current generation."""
        return Path(self.home) / f"g{self.generation}"

    @property
    def env_dir(self) -> Path:
        """The plugin's virtual environment."""
        return self.generation_dir / "env"

    @property
    def python(self) -> Path:
        """The interpreter of its environment."""
        return _venv_python(self.env_dir)

    @property
    def plugin_dir(self) -> Path | None:
        """The installed copy of the plugin directory (directory installs only)."""
        src = self.generation_dir / "src"
        return src if self.kind == "directory" else None

    def spec(self) -> PluginSpec:
        """What the runtime needs to start it with its own interpreter."""
        return PluginSpec(
            plugin_id=self.plugin_id,
            runners=tuple(RunnerEntry(name=r.name, ref=r.ref) for r in self.runners),
            plugin_dir=self.plugin_dir,
            source=f"installed:{self.home}",
            version=self.version,
            python=self.python,
        )


class PluginStatus(_Record):
    """The last discovery of an installed plugin (``status.json``), written by ``serve`` and ``install``."""

    checked_at: int
    """Unix epoch milliseconds."""
    generation: int
    """The generation checked."""
    error: str | None = None
    """Why its discovery failed; ``None`` when it loaded."""


# -- uv ----------------------------------------------------------------------------------------------------------


def find_uv() -> str:
    """The uv executable: ``$AGENTRUNNER_UV``, the uv that started this process (``uv run`` sets ``$UV``; the
    README's ``./uvw`` may have installed it off ``PATH``), the ``uv`` Python package's binary, or ``uv`` on
    ``PATH``."""
    explicit = os.environ.get("AGENTRUNNER_UV")
    if explicit:
        return explicit
    parent = os.environ.get("UV")
    if parent and os.path.isfile(parent) and os.access(parent, os.X_OK):
        return parent
    with contextlib.suppress(ImportError, FileNotFoundError):
        found: object = importlib.import_module("uv").find_uv_bin()
        if isinstance(found, str):
            return found
    on_path = shutil.which("uv")
    if on_path is None:
        raise PluginInstallError(
            "uv is needed to install plugins: `pip install uv`, put it on PATH, or set $AGENTRUNNER_UV"
        )
    return on_path


def _uv(uv: str, *args: str, cwd: Path) -> str:
    # No project configuration is read (the cwd may be inside a workspace), and the host's virtualenv is not
    # the target: every pip command names the plugin's interpreter explicitly.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT", "PYTHONPATH"}
    }
    try:
        done = subprocess.run(
            [uv, *args, "--no-config"], cwd=cwd, env=env, capture_output=True, text=True, check=False
        )
    except OSError as exc:
        raise PluginInstallError(f"cannot run {uv}: {exc}") from None
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip()
        raise PluginInstallError(f"uv {args[0]} {args[1] if len(args) > 1 else ''} failed: {detail}")
    return done.stdout


def _venv_python(env_dir: Path) -> Path:
    return env_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


# -- the host's SDK as a wheel ------------------------------------------------------------------------------------


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def host_sdk_wheel(out_dir: Path) -> Path:
    """A wheel of the SDK the host runs, built from its installed files (editable or not), so a plugin's
    environment gets exactly the host's protocol implementation and never a same-named index package."""
    dist = importlib.metadata.distribution(_SDK_DIST)
    import agentrunner

    package = Path(agentrunner.__file__).resolve().parent
    version = dist.version
    info = f"agentrunner_sdk-{version}.dist-info"
    metadata = [
        "Metadata-Version: 2.1",
        f"Name: {_SDK_DIST}",
        f"Version: {version}",
        f"Requires-Python: {dist.metadata['Requires-Python'] or '>=3.11'}",
        *(f"Requires-Dist: {r}" for r in dist.requires or []),
        "",
    ]
    files: dict[str, bytes] = {}
    for path in sorted(package.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            files[f"agentrunner/{path.relative_to(package).as_posix()}"] = path.read_bytes()
    files[f"{info}/METADATA"] = "\n".join(metadata).encode()
    files[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: agentrunner-host\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    entry_points = dist.read_text("entry_points.txt")
    if entry_points:
        files[f"{info}/entry_points.txt"] = entry_points.encode()
    record = [f"{name},{_record_hash(data)},{len(data)}" for name, data in files.items()]
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    out_dir.mkdir(parents=True, exist_ok=True)
    wheel = out_dir / f"agentrunner_sdk-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return wheel


# -- records -----------------------------------------------------------------------------------------------------


def _slug(plugin_id: str) -> str:
    return plugin_id.replace("/", "--")


def _root(data_dir: Path) -> Path:
    return data_dir / PLUGINS_DIR


@contextlib.contextmanager
def _locked(data_dir: Path) -> Generator[None]:
    root = _root(data_dir)
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def installed_plugins(data_dir: Path) -> tuple[list[InstalledPlugin], list[tuple[Path, str]]]:
    """The installed plugins (by id), and the records that could not be read (path, reason)."""
    root = _root(data_dir)
    plugins: list[InstalledPlugin] = []
    broken: list[tuple[Path, str]] = []
    if not root.is_dir():
        return plugins, broken
    for home in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        path = home / _RECORD
        if not path.is_file():
            continue
        try:
            plugins.append(InstalledPlugin.model_validate_json(path.read_bytes()))
        except (OSError, ValidationError) as exc:
            broken.append((path, f"unreadable plugin record: {exc}"))
    return plugins, broken


def record_status(data_dir: Path, plugin: InstalledPlugin, error: str | None) -> None:
    """Remember the outcome of a discovery of *plugin* (shown by ``plugins list``)."""
    status = PluginStatus(checked_at=time.time_ns() // 1_000_000, generation=plugin.generation, error=error)
    with contextlib.suppress(OSError):  # a read-only data directory must not stop the server
        _write_atomic(Path(plugin.home) / _STATUS, status.model_dump_json().encode())


def plugin_status(plugin: InstalledPlugin) -> PluginStatus | None:
    """The last recorded discovery of *plugin*, if any."""
    try:
        return PluginStatus.model_validate_json((Path(plugin.home) / _STATUS).read_bytes())
    except (OSError, ValidationError):
        return None


# -- install / remove --------------------------------------------------------------------------------------------


def _classify(source: str) -> SourceKind:
    path = Path(source)
    if path.is_dir():
        return "directory"
    if path.suffix == ".whl":
        if not path.is_file():
            raise PluginInstallError(f"{source}: no such wheel")
        return "wheel"
    return "requirement"


_LIST_ENTRY_POINTS = f"""
import importlib.metadata as m, json
out = []
for ep in m.entry_points(group={ENTRY_POINT_GROUP!r}):
    out.append({{"name": ep.name, "value": ep.value, "dist": ep.dist.name if ep.dist else None,
                "version": ep.dist.version if ep.dist else None}})
print(json.dumps(out))
"""


def _entry_point_spec(
    python: Path, *, wanted: set[str] | None
) -> tuple[str, str | None, list[InstalledRunner]]:
    done = subprocess.run(
        [str(python), "-I", "-c", _LIST_ENTRY_POINTS], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise PluginInstallError(f"cannot list the plugin's entry points: {done.stderr.strip()}")
    found: Any = json.loads(done.stdout)
    by_plugin: dict[str, list[InstalledRunner]] = {}
    versions: dict[str, str | None] = {}
    for item in found:
        if wanted is not None and str(item["dist"] or "").lower().replace("_", "-") not in wanted:
            continue
        try:
            runner_id = RunnerId.parse(f"plugin:{item['name']}")
        except InvalidRunnerIdError as exc:
            raise PluginInstallError(f"entry point {item['name']!r}: {exc.reason}") from None
        by_plugin.setdefault(runner_id.plugin_id, []).append(
            InstalledRunner(name=runner_id.runner, ref=item["value"])
        )
        versions[runner_id.plugin_id] = item["version"]
    if len(by_plugin) != 1:
        what = "no" if not by_plugin else f"{len(by_plugin)} ({', '.join(sorted(by_plugin))})"
        raise PluginInstallError(
            f"the package declares {what} plugins in the {ENTRY_POINT_GROUP!r} entry points; one is needed"
        )
    plugin_id, runners = next(iter(by_plugin.items()))
    return plugin_id, versions[plugin_id], runners


def _wheel_dist_name(wheel: Path) -> str:
    return wheel.name.split("-", 1)[0].lower().replace("_", "-")


def _requirement_name(requirement: str) -> str:
    name = requirement
    for stop in "[=<>!~;@ ":
        name = name.split(stop, 1)[0]
    return name.strip().lower().replace("_", "-")


def install_plugin(
    data_dir: Path,
    source: str,
    *,
    find_links: Sequence[str] = (),
    index_url: str | None = None,
    check: Callable[[InstalledPlugin], str | None] | None = None,
) -> InstalledPlugin:
    """Install (or upgrade) a plugin from *source* into its own environment and record it.

    *find_links* and *index_url* are passed to uv. *check*, when given, is called with the new record before
    it is committed and returns an error text (the plugin's runtime could not start or list its runners) or
    ``None``; an error aborts the install and leaves any previous generation in place.
    Raises :class:`PluginInstallError`.
    """
    kind = _classify(source)
    uv = find_uv()
    root = _root(data_dir)
    root.mkdir(parents=True, exist_ok=True)
    staging = root / f".staging-{uuid.uuid4().hex[:12]}"
    staging.mkdir()
    try:
        env_dir = staging / "env"
        _uv(uv, "venv", "--quiet", "--python", sys.executable, str(env_dir), cwd=staging)
        python = _venv_python(env_dir)
        sdk = host_sdk_wheel(staging / "wheels")
        targets: list[str] = []
        manifest_spec: PluginSpec | None = None
        if kind == "directory":
            src = staging / "src"
            shutil.copytree(Path(source), src, ignore=_COPY_IGNORE)
            if (src / MANIFEST_FILE).is_file():
                manifest_spec, reasons = load_plugin_dir(src)
                if manifest_spec is None:
                    raise PluginInstallError(f"{Path(source) / MANIFEST_FILE}: {'; '.join(reasons)}")
            if (src / "pyproject.toml").is_file():
                targets.append(str(src))
            elif manifest_spec is None:
                raise PluginInstallError(
                    f"{source}: a plugin directory needs a {MANIFEST_FILE} or a pyproject.toml"
                )
        else:
            targets.append(str(Path(source).resolve()) if kind == "wheel" else source)
        args = [
            "pip",
            "install",
            "--quiet",
            "--python",
            str(python),
            *targets,
            f"{_SDK_DIST} @ {sdk.as_uri()}",
        ]
        for link in find_links:
            args += ["--find-links", link]
        if index_url:
            args += ["--index-url", index_url]
        _uv(uv, *args, cwd=staging)
        frozen = _uv(uv, "pip", "freeze", "--python", str(python), cwd=staging)
        requirements = [line.strip() for line in frozen.splitlines() if line.strip()]
        if manifest_spec is not None:
            plugin_id = manifest_spec.plugin_id
            version = manifest_spec.version
            runners = [InstalledRunner(name=r.name, ref=r.ref) for r in manifest_spec.runners]
        else:
            # Only the installed distribution's own entry points: its dependencies may declare runners too.
            wanted: set[str] | None = None
            if kind == "wheel":
                wanted = {_wheel_dist_name(Path(source))}
            elif kind == "requirement":
                wanted = {_requirement_name(source)}
            plugin_id, version, runners = _entry_point_spec(python, wanted=wanted)
        with _locked(data_dir):
            home = root / _slug(plugin_id)
            previous = _read(home)
            generation = (previous.generation if previous else 0) + 1
            home.mkdir(exist_ok=True)
            target = home / f"g{generation}"
            if target.exists():
                shutil.rmtree(target)
            staging.rename(target)
            # The pins name the staging directory uv installed from; point them at where it now lives.
            requirements = [r.replace(str(staging), str(target)) for r in requirements]
            record = InstalledPlugin(
                plugin_id=plugin_id,
                version=version,
                kind=kind,
                source=str(Path(source).resolve()) if kind != "requirement" else source,
                generation=generation,
                runners=runners,
                requirements=requirements,
                installed_at=time.time_ns() // 1_000_000,
                home=str(home),
            )
            error = check(record) if check is not None else None
            if error is not None:
                shutil.rmtree(target, ignore_errors=True)
                raise PluginInstallError(f"plugin {plugin_id} does not load: {error}")
            _write_atomic(home / _RECORD, record.model_dump_json(indent=2).encode())
            (home / "requirements.lock").write_text("\n".join(requirements) + "\n", encoding="utf-8")
            record_status(data_dir, record, None)
            for old in home.glob("g*"):
                # Keep the previous generation: a running server may still be draining its process.
                number = old.name[1:]
                if number.isdigit() and int(number) < generation - 1:
                    shutil.rmtree(old, ignore_errors=True)
            return record
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def _read(home: Path) -> InstalledPlugin | None:
    try:
        return InstalledPlugin.model_validate_json((home / _RECORD).read_bytes())
    except (OSError, ValidationError):
        return None


def remove_plugin(data_dir: Path, plugin_id: str) -> InstalledPlugin:
    """Uninstall *plugin_id*: its record goes at once (a server stops using it before its next event), its
    directory with it. Raises :class:`PluginInstallError` when it is not installed."""
    with _locked(data_dir):
        home = _root(data_dir) / _slug(plugin_id)
        record = _read(home)
        if record is None:
            raise PluginInstallError(f"plugin {plugin_id} is not installed")
        (home / _RECORD).unlink()
        shutil.rmtree(home, ignore_errors=True)
        return record


class _NoRuns:
    """Back-call handler of a runtime started only to list its runners: there is no run to call for."""

    async def handle(self, request: BackCallRequest) -> dict[str, Any]:
        raise UnauthorizedError("no run is live: the plugin was started only to check it loads")

    async def handle_stream(self, request: BackCallRequest) -> AsyncIterator[dict[str, Any]]:
        raise UnauthorizedError("no run is live: the plugin was started only to check it loads")
        yield {}  # pragma: no cover - makes this an async generator


async def _listed_runners(plugin: InstalledPlugin, *, timeout: float) -> list[dict[str, Any]]:
    from .manager import RuntimeManager  # the manager imports this module's neighbours, not this one

    manager = RuntimeManager(_NoRuns(), plugins=[plugin.spec()])
    try:
        return await asyncio.wait_for(manager.connection(plugin.plugin_id).list_runners(), timeout)
    finally:
        await manager.aclose()


async def runner_manifests(plugin: InstalledPlugin, *, timeout: float = 60.0) -> list[AgentRunnerManifest]:
    """Start *plugin*'s runtime with its own interpreter and return the valid manifests of its own runners
    (the registry reads the same at ``serve`` start and warns about the others). Raises :class:`HostError`,
    :class:`TimeoutError` or :class:`OSError` when the runtime does not start or answer."""
    manifests: list[AgentRunnerManifest] = []
    for item in await _listed_runners(plugin, timeout=timeout):
        try:
            manifest = AgentRunnerManifest.model_validate(item)
        except ValidationError:
            continue
        if manifest.runner_id.plugin_id == plugin.plugin_id:
            manifests.append(manifest)
    return manifests


async def check_loads(plugin: InstalledPlugin, *, timeout: float = 60.0) -> str | None:
    """Start *plugin*'s runtime with its own interpreter and ask for its runners: ``None`` when it answers with
    at least one of its own, else why not."""
    try:
        manifests = await _listed_runners(plugin, timeout=timeout)
    except (HostError, TimeoutError, OSError) as exc:
        return str(exc) or type(exc).__name__
    if not manifests:
        return "its runtime reports no runner of its own"
    return None
