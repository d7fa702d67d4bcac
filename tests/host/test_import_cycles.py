"""No import cycle among the host's modules, counting every import statement in the source: top-level ones,
imports inside functions (lazy) and ``TYPE_CHECKING`` blocks alike. The graph is read from the source with
``ast``, not from ``sys.modules``, so an import that only runs on some path still counts."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import agentrunner_host

PACKAGE = "agentrunner_host"
ROOT = Path(agentrunner_host.__file__).parent


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).with_suffix("")
        if "versions" in rel.parts:  # Alembic revisions are loaded by Alembic, never imported
            continue
        parts = [PACKAGE, *rel.parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    if node.level > 1:
        base = base[: -(node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _graph() -> dict[str, set[str]]:
    modules = _modules()

    def known(name: str) -> str | None:
        # the module itself, or the nearest enclosing host module (``pkg.mod.attr`` → ``pkg.mod``)
        while name:
            if name in modules:
                return name
            name = name.rpartition(".")[0]
        return None

    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                source = _resolve(name, is_package, node)
                # ``from pkg import sub`` imports the submodule when there is one
                targets = [f"{source}.{alias.name}" for alias in node.names]
            for target in targets:
                if not target.startswith(PACKAGE):
                    continue
                resolved = known(target)
                # A module's own packages are initialised before it runs: an edge to an ancestor is no cycle.
                if resolved is not None and resolved != name and not name.startswith(resolved + "."):
                    graph[name].add(resolved)
    return graph


def test_the_walk_sees_lazy_imports() -> None:
    """The walk reads function bodies: cli.py imports the stores engine inside its commands."""
    graph = _graph()
    assert "agentrunner_host.stores.engine" in graph["agentrunner_host.cli"]
    assert len(graph) > 50


def test_host_modules_import_each_other_without_a_cycle() -> None:
    graph = _graph()
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        cycle = exc.args[1]
        raise AssertionError("import cycle: " + " -> ".join(cycle)) from None
