"""What a harness reads about its run: ``agent-context.json``, ``LANGBOT_CONTEXT.md`` and skills.

Projection follows AGENT_CONTEXT_PROTOCOL §4.5 / OFFICIAL_RUNNER_PLUGINS §7.1: the event-first context is
written as JSON (schema :data:`CONTEXT_SCHEMA`) and as a short Markdown summary into the run directory, and the
prompt on stdin names both before the user's text. Skills become ``SKILL.md`` directories, written read-only;
each projected file's name and sha256, the skill's digest (:func:`skill_digest`) and version go into the run's
metadata so an audit can tell what the harness saw. When the operator pins skills (``skill_pins`` of the
workspace policy, from ``[[security.harness_skills]]``), :func:`verify_skills` refuses, before anything is
written, a skill that is not pinned or whose digest (or pinned version) differs.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Final

import orjson
from agentrunner import AgentRunContext
from pydantic import JsonValue

from .errors import HarnessFailure
from .jsonvalues import as_list, as_object

__all__ = [
    "SkillPin",
    "skill_digest",
    "verify_skills",
    "CONTEXT_FILE",
    "CONTEXT_MARKDOWN_FILE",
    "CONTEXT_SCHEMA",
    "ProjectedSkill",
    "SkillSpec",
    "context_document",
    "parse_skill_pins",
    "parse_skills",
    "project_skills",
    "prompt_text",
    "write_context",
]

CONTEXT_SCHEMA: Final = "langbot.agent_runner.external_harness_context.v1"
"""``schema`` of ``agent-context.json``."""
CONTEXT_FILE: Final = "agent-context.json"
"""The JSON projection's file name."""
CONTEXT_MARKDOWN_FILE: Final = "LANGBOT_CONTEXT.md"
"""The Markdown summary's file name."""
_SAFE_NAME: Final = re.compile(r"[^A-Za-z0-9_.-]+")
_MAX_SKILLS: Final = 64
_MAX_SKILL_BYTES: Final = 1024 * 1024


def _json(value: Any) -> Any:
    return orjson.loads(orjson.dumps(value, default=str))


def context_document(ctx: AgentRunContext, *, working_directory: Path) -> dict[str, Any]:
    """The ``agent-context.json`` document (no config: it may hold credentials)."""
    dumped = ctx.model_dump(mode="json", exclude={"config"})
    runtime = dict(dumped.get("runtime") or {})
    metadata = dict(runtime.get("metadata") or {})
    # The bridge's token is for the harness's MCP client only, never for files the model can read.
    metadata.pop("mcp_bridge", None)
    runtime["metadata"] = metadata
    return {
        "schema": CONTEXT_SCHEMA,
        "run_id": ctx.run_id,
        "working_directory": str(working_directory),
        "trigger": dumped.get("trigger"),
        "event": dumped.get("event"),
        "conversation": dumped.get("conversation"),
        "actor": dumped.get("actor"),
        "subject": dumped.get("subject"),
        "input": {
            "text": ctx.input.text,
            "attachments": dumped["input"].get("attachments", []),
            "contents": dumped["input"].get("contents", []),
        },
        "delivery": dumped.get("delivery"),
        "resources": dumped.get("resources"),
        "context": dumped.get("context"),
        "state": dumped.get("state"),
        "runtime": runtime,
        "adapter": dumped.get("adapter"),
        "metadata": dumped.get("metadata") or {},
    }


def _markdown(doc: dict[str, Any], json_path: Path) -> str:
    event = as_object(doc.get("event")) or {}
    actor = as_object(doc.get("actor")) or {}
    text = str((as_object(doc.get("input")) or {}).get("text") or "")
    pretty = orjson.OPT_INDENT_2
    return "\n".join(
        [
            "# LangBot Run Context",
            "",
            f"- Run id: `{doc['run_id']}`",
            f"- Event: `{event.get('event_type', '')!s}` from `{event.get('source', '')!s}`",
            f"- Actor: `{actor.get('actor_type', '')!s}` `{actor.get('actor_id') or ''!s}`",
            f"- Working directory: `{doc['working_directory']}`",
            f"- Full context (JSON): `{json_path}`",
            "",
            "## Current input",
            "",
            text,
            "",
            "## Authorized resources",
            "",
            "```json",
            orjson.dumps(_json(doc.get("resources")), option=pretty).decode(),
            "```",
            "",
            "## Context access",
            "",
            "```json",
            orjson.dumps(_json(doc.get("context")), option=pretty).decode(),
            "```",
            "",
        ]
    )


def write_context(ctx: AgentRunContext, run_dir: Path, *, working_directory: Path) -> tuple[Path, Path]:
    """Write both files into *run_dir*; their paths (JSON, Markdown)."""
    doc = context_document(ctx, working_directory=working_directory)
    json_path = run_dir / CONTEXT_FILE
    md_path = run_dir / CONTEXT_MARKDOWN_FILE
    try:
        json_path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2, default=str))
        md_path.write_text(_markdown(doc, json_path), encoding="utf-8")
    except OSError as exc:
        raise HarnessFailure(
            "context_injection_error", f"could not write the run context: {exc.strerror}"
        ) from exc
    return json_path, md_path


def prompt_text(
    text: str | None, *, context_files: tuple[Path, Path] | None, skills_dir: Path | None = None
) -> str:
    """The prompt written to the CLI's stdin: lines naming the context files (and the skills), then the
    user's text."""
    lines: list[str] = []
    if context_files is not None:
        json_path, md_path = context_files
        lines += [
            f"LangBot run context: {md_path} (summary) and {json_path} (full JSON).",
            "Read them when you need the event, the conversation or what you may access.",
        ]
    if skills_dir is not None:
        lines.append(f"Skills for this run: {skills_dir} (one directory with a SKILL.md per skill).")
    if lines:
        lines.append("")
    lines.append(text or "")
    return "\n".join(lines)


# -- skills ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SkillSpec:
    """One skill of ``skills-json``."""

    name: str
    """Display name."""
    content: str
    """``SKILL.md``."""
    files: tuple[tuple[str, str], ...] = ()
    """Extra files: (relative path, text)."""
    version: str | None = None
    """The version the binding says it is (checked against a pin that names one)."""


@dataclass(frozen=True, slots=True)
class SkillPin:
    """An operator-approved skill: its name, digest and optionally its version."""

    sha256: str
    """:func:`skill_digest` of its files."""
    version: str | None = None
    """The version it must declare, when pinned."""


def _file_digests(files: list[tuple[str, bytes]]) -> str:
    lines = [f"{hashlib.sha256(data).hexdigest()}  {path}\n" for path, data in sorted(files)]
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def skill_digest(skill: SkillSpec) -> str:
    """The skill's sha256: of the ``sha256sum`` lines ``<hex>  <path>`` of its files (``SKILL.md`` and the
    extra files) in path order. In the projected skill's directory, ``find . -type f -printf '%P\n' | LC_ALL=C
    sort | xargs -d '\n' sha256sum | sha256sum`` gives the same."""
    return _file_digests([("SKILL.md", skill.content.encode()), *((p, t.encode()) for p, t in skill.files)])


def verify_skills(skills: list[SkillSpec], pins: Mapping[str, SkillPin] | None) -> list[bool]:
    """Whether each skill was verified against a pin (``pins is None``: the operator pins nothing, so none
    is, and all are projected); :class:`HarnessFailure` ``config_invalid`` for an unpinned or differing one."""
    if pins is None:
        return [False] * len(skills)
    for skill in skills:
        digest = skill_digest(skill)
        pin = pins.get(skill.name)
        if pin is None:
            raise HarnessFailure(
                "config_invalid",
                f"skill {skill.name!r} (sha256 {digest}) is not pinned by the operator "
                "([[security.harness_skills]])",
            )
        if pin.sha256 != digest:
            raise HarnessFailure(
                "config_invalid",
                f"skill {skill.name!r} has sha256 {digest}, the operator pinned {pin.sha256}",
            )
        if pin.version is not None and skill.version != pin.version:
            raise HarnessFailure(
                "config_invalid",
                f"skill {skill.name!r} is version {skill.version!r}, the operator pinned {pin.version!r}",
            )
    return [True] * len(skills)


def parse_skill_pins(raw: object) -> dict[str, SkillPin] | None:
    """``skill_pins`` of the workspace policy: ``None`` when the operator pins nothing."""
    if raw is None:
        return None
    pins: dict[str, SkillPin] = {}
    for item in as_list(raw):
        entry = as_object(item) or {}
        name, digest, version = entry.get("name"), entry.get("sha256"), entry.get("version")
        if isinstance(name, str) and isinstance(digest, str):
            pins[name] = SkillPin(sha256=digest, version=version if isinstance(version, str) else None)
    return pins


@dataclass(frozen=True, slots=True)
class ProjectedSkill:
    """A skill as written: its directory and the digest of each file."""

    name: str
    """Display name."""
    directory: str
    """Directory name (safe form of the name)."""
    files: tuple[tuple[str, str], ...]
    """(relative path, sha256 hex) of every file written."""
    sha256: str = ""
    """:func:`skill_digest` of the skill."""
    version: str | None = None
    """The version the binding gave."""
    verified: bool = False
    """Whether it matched an operator pin."""

    def metadata(self) -> dict[str, JsonValue]:
        """The run-metadata entry."""
        return {
            "name": self.name,
            "directory": self.directory,
            "sha256": self.sha256,
            "version": self.version,
            "verified": self.verified,
            "source": "binding",
            "files": [{"path": p, "sha256": d} for p, d in self.files],
        }


def parse_skills(raw: object) -> list[SkillSpec]:
    """``skills-json``: a list (or ``{"skills": [...]}``, or its JSON text) of ``{name|title, content|markdown,
    files: [{path, content}]}``; ``context_injection_error`` when it is malformed."""
    if raw is None or raw in ("", [], {}):
        return []
    if isinstance(raw, str):
        try:
            raw = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise HarnessFailure("context_injection_error", f"skills-json is not JSON: {exc}") from exc
    wrapper = as_object(raw)
    if wrapper is not None and "skills" in wrapper:
        raw = wrapper["skills"]
    items = as_list(raw)
    if not items and not isinstance(raw, list):
        raise HarnessFailure("context_injection_error", "skills-json must be a list of skills")
    if len(items) > _MAX_SKILLS:
        raise HarnessFailure("context_injection_error", f"skills-json holds more than {_MAX_SKILLS} skills")
    skills: list[SkillSpec] = []
    for index, item in enumerate(items):
        entry = as_object(item)
        if entry is None:
            raise HarnessFailure("context_injection_error", f"skills-json[{index}] must be an object")
        name = entry.get("name") or entry.get("title")
        content = entry.get("content") or entry.get("markdown") or ""
        if not isinstance(name, str) or not name.strip() or not isinstance(content, str):
            raise HarnessFailure(
                "context_injection_error", f"skills-json[{index}] needs a name and text content"
            )
        files: list[tuple[str, str]] = []
        for raw_file in as_list(entry.get("files")):
            f = as_object(raw_file) or {}
            path, text = f.get("path"), f.get("content")
            if not isinstance(path, str) or not isinstance(text, str):
                raise HarnessFailure(
                    "context_injection_error", f"skills-json[{index}].files entries need path and content"
                )
            files.append((path, text))
        version = entry.get("version")
        if version is not None and not isinstance(version, str):
            raise HarnessFailure("context_injection_error", f"skills-json[{index}].version must be a string")
        skills.append(SkillSpec(name=name.strip(), content=content, files=tuple(files), version=version))
    return skills


def _safe_name(name: str) -> str:
    safe = _SAFE_NAME.sub("-", name).strip(".-")[:64]
    return safe or "skill"


def _make_writable(path: Path) -> None:
    for root, dirs, files in os.walk(path):
        os.chmod(root, 0o700)
        for d in dirs:
            with contextlib.suppress(OSError):
                os.chmod(Path(root) / d, 0o700)
        for f in files:
            with contextlib.suppress(OSError):
                os.chmod(Path(root) / f, 0o600)


def _make_read_only(path: Path) -> None:
    for root, dirs, files in os.walk(path, topdown=False):
        for f in files:
            os.chmod(Path(root) / f, stat.S_IRUSR)
        for d in dirs:
            os.chmod(Path(root) / d, stat.S_IRUSR | stat.S_IXUSR)
    os.chmod(path, stat.S_IRUSR | stat.S_IXUSR)


def project_skills(
    skills: list[SkillSpec], parent: Path, *, verified: list[bool] | None = None
) -> list[ProjectedSkill]:
    """Write every skill to ``<parent>/<safe-name>/`` read-only (replacing an earlier projection);
    *verified* (from :func:`verify_skills`) is recorded with each."""
    projected: list[ProjectedSkill] = []
    seen: set[str] = set()
    for index, skill in enumerate(skills):
        directory = _safe_name(skill.name)
        if directory in seen:
            raise HarnessFailure(
                "context_injection_error", f"two skills project to the directory {directory!r}"
            )
        seen.add(directory)
        target = parent / directory
        files = [("SKILL.md", skill.content), *skill.files]
        for rel, _ in files:
            pure = PurePosixPath(rel)
            if pure.is_absolute() or ".." in pure.parts or not pure.parts:
                raise HarnessFailure(
                    "context_injection_error", f"skill {skill.name!r}: file path {rel!r} leaves its directory"
                )
        if sum(len(text.encode()) for _, text in files) > _MAX_SKILL_BYTES:
            raise HarnessFailure(
                "context_injection_error", f"skill {skill.name!r} is larger than {_MAX_SKILL_BYTES} bytes"
            )
        try:
            if target.is_symlink():
                target.unlink()
            elif target.exists():
                _make_writable(target)
                shutil.rmtree(target)
            target.mkdir(parents=True, mode=0o700)
            digests: list[tuple[str, str]] = []
            for rel, text in files:
                path = target / PurePosixPath(rel)
                path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                data = text.encode()
                path.write_bytes(data)
                digests.append((rel, hashlib.sha256(data).hexdigest()))
            _make_read_only(target)
        except OSError as exc:
            raise HarnessFailure(
                "context_injection_error", f"could not write skill {skill.name!r}: {exc.strerror}"
            ) from exc
        projected.append(
            ProjectedSkill(
                name=skill.name,
                directory=directory,
                files=tuple(digests),
                sha256=skill_digest(skill),
                version=skill.version,
                verified=bool(verified and verified[index]),
            )
        )
    return projected
