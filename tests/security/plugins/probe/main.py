"""Runners of the ``security/probe`` test plugin: a hostile plugin trying what isolation must stop."""

from __future__ import annotations

import base64
import os
import resource
import tempfile
from collections.abc import AsyncIterator

from agentrunner import (
    AgentRunAPI,
    AgentRunContext,
    AgentRunner,
    AgentRunnerManifest,
    AgentRunnerPermissions,
    AgentRunResult,
    ArtifactRef,
    I18nObject,
    codec,
)


def _manifest(name: str) -> AgentRunnerManifest:
    return AgentRunnerManifest(
        id=f"plugin:security/probe/{name}", name=name, label=I18nObject(en_US=f"probe {name}")
    )


def _try_read(path: str, sentinels: list[str]) -> dict[str, object]:
    """What reading *path* gave: never the content itself, only whether it held a sentinel."""
    try:
        if os.path.isdir(path):
            names = os.listdir(path)
            return {"read": True, "entries": len(names)}
        with open(path, "rb") as handle:
            data = handle.read(1 << 20)
    except OSError as exc:
        return {"read": False, "error": type(exc).__name__}
    return {"read": True, "bytes": len(data), "sentinel": any(s.encode() in data for s in sentinels)}


class Snoop(AgentRunner):
    """Reads the host's /proc files and the paths in ``config.targets``; reports what it got."""

    manifest = _manifest("snoop")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        targets = ctx.config.get("targets") or {}
        sentinels = [str(s) for s in targets.get("sentinels", [])]
        host = os.getppid()
        paths = [f"/proc/{host}/environ", f"/proc/{host}/mem", f"/proc/{host}/maps"]
        paths += [str(p) for p in targets.get("paths", [])]
        report = {
            "uid": os.getuid(),
            "euid": os.geteuid(),
            "host_pid": host,
            "env_has_sentinel": any(s in v for v in os.environ.values() for s in sentinels),
            "results": {p: _try_read(p, sentinels) for p in paths},
            "limits": {
                name: resource.getrlimit(getattr(resource, name))[0]
                for name in ("RLIMIT_CPU", "RLIMIT_AS", "RLIMIT_NOFILE", "RLIMIT_FSIZE")
            },
        }
        out = self.emitter(ctx)
        yield out.message(codec.dumps_str(report))
        yield out.complete()


class Spin(AgentRunner):
    """Burns CPU forever (a runaway loop)."""

    manifest = _manifest("spin")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        total = 0
        while True:  # never yields to the event loop: only a limit stops it
            total += 1
        yield self.emitter(ctx).complete()  # pragma: no cover


class Hog(AgentRunner):
    """Allocates memory until something stops it, then reports how far it got."""

    manifest = _manifest("hog")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        blocks: list[bytes] = []
        try:
            while len(blocks) < 64:  # 16 GiB would be far beyond any test limit
                blocks.append(b"x" * (256 * 1024 * 1024))
        except MemoryError:
            blocks.clear()
            raise
        yield self.emitter(ctx).message(f"allocated {len(blocks)} blocks")
        yield self.emitter(ctx).complete()


class Scribble(AgentRunner):
    """Writes one ever-growing file in its working directory."""

    manifest = _manifest("scribble")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        chunk = b"y" * (1024 * 1024)
        with tempfile.NamedTemporaryFile(dir=os.getcwd()) as handle:
            for _ in range(4096):
                handle.write(chunk)
                handle.flush()
        yield self.emitter(ctx).complete()


class Echo(AgentRunner):
    """Answers ``config.prefix`` + the input text (the prefix may come from a secret variable)."""

    manifest = _manifest("echo")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        prefix = str(ctx.config.get("prefix") or "")
        out = self.emitter(ctx)
        yield out.message(prefix + "".join(ctx.input.text_parts()))
        yield out.complete()


class Wander(AgentRunner):
    """Looks for host paths: its working directory, the context it was given, an artifact named to climb out
    of the store, and artifact reads by path-like ids; reports what it saw."""

    manifest = _manifest("wander").model_copy(
        update={"permissions": AgentRunnerPermissions(artifacts=["metadata", "read"])}
    )

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        cwd = os.getcwd()
        reads: dict[str, str] = {}
        for bad in ("../../etc/passwd", "/etc/passwd", "art_../../x"):
            try:
                await api.artifacts.read_range(bad)
                reads[bad] = "read"
            except Exception as exc:  # the typed refusal is what the test looks at
                reads[bad] = getattr(exc, "code", type(exc).__name__)
        report = {
            "cwd": cwd,
            "cwd_mode": os.stat(cwd).st_mode & 0o777,
            "cwd_entries": os.listdir(cwd),
            "context": ctx.model_dump_json(),
            "reads": reads,
        }
        out = self.emitter(ctx)
        ref = ArtifactRef(
            artifact_id="../../../escape",
            artifact_type="file",
            mime_type="text/plain",
            name="../../escape.txt",
        )
        yield out.artifact(ref, content_base64=base64.b64encode(b"climbing").decode())
        yield out.message(codec.dumps_str(report))
        yield out.complete()
