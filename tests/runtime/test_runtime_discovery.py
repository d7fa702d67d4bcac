"""Plugin discovery: manifest.yaml directories and entry points."""

from __future__ import annotations

import logging
import shutil
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
from agentrunner_host.runtime import PluginManifest, discover_entry_points, discover_plugins
from agentrunner_host.runtime import discovery as discovery_module

from .helpers import ECHO_DIR

_ONE_RUNNER = """\
apiVersion: agentrunner/v1
kind: AgentRunner
metadata:
  author: acme
  name: solo
  label: { en_US: Solo, zh_Hans: 独奏 }
  description: One runner.
  version: 1.2.3
spec:
  protocol_version: "1"
  config:
    - { name: api_key, label: API key, type: string, secret: true }
  capabilities: { streaming: true }
  permissions: { storage: [plugin] }
execution:
  python: { path: ./main.py, attr: SoloRunner }
"""


def _plugin(root: Path, name: str, manifest: str, *, files: tuple[str, ...] = ("main.py",)) -> Path:
    directory = root / name
    directory.mkdir()
    (directory / "manifest.yaml").write_text(manifest, encoding="utf-8")
    for file in files:
        (directory / file).write_text("# runner code\n")
    return directory


def test_the_one_runner_form_declares_a_default_runner_with_its_spec(tmp_path: Path) -> None:
    """Top-level spec/execution is one runner named 'default'; its §4.2 manifest is built from the spec."""
    _plugin(tmp_path, "solo", _ONE_RUNNER)
    found = discover_plugins([tmp_path])
    assert found.warnings == []
    spec = found.plugins["acme/solo"]
    assert spec.runner_ids() == ["plugin:acme/solo/default"]
    assert spec.version == "1.2.3"
    runner = spec.runners[0]
    assert runner.ref == "./main.py:SoloRunner"
    assert runner.manifest is not None
    assert runner.manifest.capabilities.streaming is True
    assert runner.manifest.permissions.storage == ["plugin"]
    assert runner.manifest.secret_fields() == {"api_key"}
    assert runner.manifest.label.get("zh_Hans") == "独奏"
    assert spec.runtime_args() == [
        "--plugin-dir",
        str((tmp_path / "solo").resolve()),
        "--runner",
        "./main.py:SoloRunner",
        "--plugin-id",
        "acme/solo",
    ]


def test_the_runners_list_form_declares_several_runners() -> None:
    """A 'runners:' list gives one entry per runner, each with its own spec and class."""
    found = discover_plugins([ECHO_DIR.parent])
    spec = found.plugins["tests/echo"]
    assert [r.name for r in spec.runners] == [
        "streamer",
        "caller",
        "sleeper",
        "crasher",
        "envdump",
        "spawner",
        "bigger",
    ]
    assert spec.runners[1].manifest is not None
    assert spec.runners[1].manifest.permissions.models == ["stream"]


def test_bad_manifests_warn_with_file_and_reason_and_never_hide_good_ones(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Each broken manifest yields one warning naming its file and what is wrong; good plugins still load."""
    shutil.copytree(ECHO_DIR, tmp_path / "a-good")
    _plugin(tmp_path, "b-yaml", "apiVersion: [unclosed\n")
    _plugin(tmp_path, "c-schema", _ONE_RUNNER.replace("execution:", "excution:"))
    _plugin(tmp_path, "d-missing-file", _ONE_RUNNER, files=())
    _plugin(tmp_path, "e-escape", _ONE_RUNNER.replace("./main.py", "../../etc/x.py"))
    _plugin(tmp_path, "f-kind", _ONE_RUNNER.replace("kind: AgentRunner", "kind: Tool"))
    _plugin(tmp_path, "g-protocol", _ONE_RUNNER.replace('protocol_version: "1"', 'protocol_version: "2"'))
    _plugin(tmp_path, "h-author", _ONE_RUNNER.replace("author: acme", "author: bad/author"))
    (tmp_path / "i-no-manifest").mkdir()
    with caplog.at_level(logging.WARNING, logger="agentrunner_host.runtime.discovery"):
        found = discover_plugins([tmp_path])
    assert list(found.plugins) == ["tests/echo"]
    by_dir = {Path(w.path).parent.name: w.reason for w in found.warnings}
    assert sorted(by_dir) == [
        "b-yaml",
        "c-schema",
        "d-missing-file",
        "e-escape",
        "f-kind",
        "g-protocol",
        "h-author",
    ]
    assert "invalid YAML" in by_dir["b-yaml"]
    assert "excution" in by_dir["c-schema"]
    assert "does not exist" in by_dir["d-missing-file"]
    assert "inside the plugin directory" in by_dir["e-escape"]
    assert "kind" in by_dir["f-kind"]
    assert "protocol_version '2' is not supported" in by_dir["g-protocol"]
    assert "metadata.author" in by_dir["h-author"]
    assert all(w.path.endswith("manifest.yaml") for w in found.warnings)
    assert caplog.text.count("skipping plugin") == 7


def test_a_duplicate_plugin_id_keeps_the_first_and_warns(tmp_path: Path) -> None:
    """Two directories claiming the same author/name: the first wins, the second is a warning."""
    _plugin(tmp_path, "one", _ONE_RUNNER)
    _plugin(tmp_path, "two", _ONE_RUNNER)
    found = discover_plugins([tmp_path])
    assert found.plugins["acme/solo"].source.endswith("one/manifest.yaml")
    assert len(found.warnings) == 1
    assert "already provided" in found.warnings[0].reason


def test_a_missing_plugin_directory_is_a_warning(tmp_path: Path) -> None:
    """A configured directory that does not exist is reported, not raised."""
    found = discover_plugins([tmp_path / "nowhere"])
    assert found.plugins == {}
    assert found.warnings[0].reason == "plugin directory does not exist"


def test_both_manifest_forms_at_once_are_rejected() -> None:
    """'runners:' and top-level execution together are ambiguous."""
    with pytest.raises(ValueError, match="not both"):
        PluginManifest.model_validate(
            {
                "apiVersion": "agentrunner/v1",
                "kind": "AgentRunner",
                "metadata": {"author": "a", "name": "b"},
                "execution": {"python": {"module": "m", "attr": "A"}},
                "runners": [{"name": "x", "execution": {"python": {"module": "m", "attr": "A"}}}],
            }
        )


def test_entry_points_are_grouped_into_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    """Entry points named author/plugin/runner become one plugin per author/plugin; bad names warn."""
    eps = [
        EntryPoint(name="acme/tools/alpha", value="acme_tools.runners:Alpha", group="agentrunner.runners"),
        EntryPoint(name="acme/tools/beta", value="acme_tools.runners:Beta", group="agentrunner.runners"),
        EntryPoint(name="not-a-runner-id", value="x:Y", group="agentrunner.runners"),
    ]
    monkeypatch.setattr(discovery_module, "entry_points", lambda group: eps)
    found = discover_entry_points()
    spec = found.plugins["acme/tools"]
    assert [r.ref for r in spec.runners] == ["acme_tools.runners:Alpha", "acme_tools.runners:Beta"]
    assert spec.runtime_args() == [
        "--runner",
        "acme_tools.runners:Alpha",
        "--runner",
        "acme_tools.runners:Beta",
        "--plugin-id",
        "acme/tools",
    ]
    assert [w.path for w in found.warnings] == ["entry-point:not-a-runner-id"]
