"""One source for a runner's declaration: the class attribute. ``manifest.yaml`` names the plugin and where the
class is; when it repeats the declaration (``spec``), the host checks it against the class and refuses a runner
whose two declarations differ. Every manifest file in this repository agrees with its class."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from agentrunner.wire import load_runner_class
from agentrunner_host.registry import manifest_differences
from agentrunner_host.runtime.discovery import MANIFEST_FILE, load_plugin_dir

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = sorted(
    p for p in REPO.glob(f"**/{MANIFEST_FILE}") if ".venv" not in p.parts and "node_modules" not in p.parts
)


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: str(p.parent.relative_to(REPO)))
def test_every_manifest_file_agrees_with_its_runner_class(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Capabilities, permissions, context policy, config form and protocol version are the class's."""
    plugin_dir = path.parent
    spec, reasons = load_plugin_dir(plugin_dir)
    assert spec is not None, reasons
    monkeypatch.setattr(sys, "path", [str(plugin_dir), str(plugin_dir / "src"), *sys.path])
    for runner in spec.runners:
        if not runner.declared:
            continue
        assert runner.manifest is not None
        cls = load_runner_class(runner.ref, base_dir=plugin_dir)
        assert manifest_differences(runner.manifest, cls.manifest) == [], f"{path}: runner {runner.name}"
