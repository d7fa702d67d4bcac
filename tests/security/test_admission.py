"""Admission: one id pattern for every id (HTTP, config file, CLI), and an agent's runner must be installed
and its config must fit the runner's form (typed 422 naming the field; the CLI refuses the same)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from agentrunner import DynamicFormItemSchema
from agentrunner_host.admission import ID_PATTERN, config_problems, is_valid_id
from agentrunner_host.cli import EXIT_FAILURE, EXIT_OK, cli
from agentrunner_host.config import ConfigFileError
from agentrunner_host.service import HostService

from .conftest import SettingsFactory

ECHO = "plugin:agentrunner/echo/default"
BAD_IDS = ["../../etc/passwd", "a/b", "a\x00b", " a", "a b", ".hidden", "..", "", "x" * 201, "代理", "a\nb"]
GOOD_IDS = ["a", "agent-1", "team:support", "oc_5f3c@chat", "-1001234567890", "v1.2+build=3", "_x"]


@pytest.mark.parametrize("value", BAD_IDS)
def test_the_pattern_refuses_path_like_and_control_ids(value: str) -> None:
    """Traversal, separators, NUL, whitespace, a leading dot, non-ASCII and over-long ids are refused."""
    assert not is_valid_id(value)


@pytest.mark.parametrize("value", GOOD_IDS)
def test_the_pattern_accepts_platform_ids(value: str) -> None:
    """Ids platforms actually use (group ids with signs, ``@``, ``:``) pass."""
    assert is_valid_id(value)


async def test_every_http_id_field_uses_the_pattern(client: httpx.AsyncClient) -> None:
    """Agents, bindings, scope ids, event ids and conversation/thread/bot/workspace ids in bodies, and every
    path id: a bad id is 422 naming the field, and nothing is stored."""
    for bad in BAD_IDS:
        agent = await client.post("/v1/agents", json={"agent_id": bad, "runner_id": ECHO})
        assert agent.status_code == 422 and "agent_id" in agent.json()["error"]["message"], bad
        binding = await client.post("/v1/bindings", json={"binding_id": bad, "agent_id": "x"})
        assert binding.status_code == 422 and "binding_id" in binding.json()["error"]["message"], bad
        target = await client.post("/v1/bindings", json={"binding_id": "b", "agent_id": bad})
        assert target.status_code == 422 and "agent_id" in target.json()["error"]["message"], bad
        scope = await client.post(
            "/v1/bindings",
            json={"binding_id": "b", "agent_id": "x", "scope": {"type": "conversation", "id": bad}},
        )
        assert scope.status_code == 422 and "scope" in scope.json()["error"]["message"], bad
        for field in ("event_id", "conversation_id", "thread_id", "bot_id", "workspace_id"):
            event = await client.post("/v1/events", json={"text": "x", field: bad})
            assert event.status_code == 422 and field in event.json()["error"]["message"], (field, bad)
    listed = (await client.get("/v1/agents")).json()["agents"]
    assert [a["agent"]["agent_id"] for a in listed if a["source"] != "default"] == []
    for path in (
        "/v1/agents/..%2F..%2Fetc%2Fpasswd",
        "/v1/agents/a%00b",
        "/v1/bindings/.hidden",
        "/v1/runs/a%20b",
        "/v1/runs/a%2Fb/results",
        "/v1/conversations/%E4%BB%A3/transcript",
        "/v1/conversations/ok/transcript?thread_id=a%2Fb",
    ):
        response = await client.get(path)
        # An encoded "/" splits the path (no route: 404); every other bad id is refused by the pattern.
        assert response.status_code == (404 if "%2F" in path.split("?")[0] else 422), path
    assert ID_PATTERN in (await client.get("/openapi.json")).text.replace("\\\\", "\\")


def test_the_config_file_uses_the_pattern(make_settings: SettingsFactory) -> None:
    """A configured agent or binding with a bad id is a configuration error naming the key."""
    agent = f'[[agents]]\nagent_id = "../x"\nrunner_id = "{ECHO}"\n'
    with pytest.raises(ConfigFileError, match=r"agents\[0\]\.agent_id"):
        make_settings(agent)
    binding = (
        f'[[agents]]\nagent_id = "a"\nrunner_id = "{ECHO}"\n'
        '[[bindings]]\nbinding_id = "b/c"\nagent_id = "a"\n'
    )
    with pytest.raises(ConfigFileError, match=r"bindings\[0\]\.binding_id"):
        make_settings(binding)


def _cli(tmp_path: Path, *argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = cli([*argv, "--data-dir", str(tmp_path / "cli-data")], out=out)
    return code, out.getvalue()


def test_the_cli_uses_the_pattern_and_admits_only_valid_agents(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``agents add``/``bindings add`` refuse bad ids, unknown runners and configs that do not fit."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AGENTRUNNER_CONFIG", raising=False)
    assert _cli(tmp_path, "agents", "add", "../etc", "--runner", ECHO)[0] == EXIT_FAILURE
    assert "agent_id" in capsys.readouterr().err
    assert _cli(tmp_path, "bindings", "add", "a/b", "--agent", "x")[0] == EXIT_FAILURE
    assert "binding_id" in capsys.readouterr().err
    assert _cli(tmp_path, "chat", "--conversation", "../c", "-m", "hi")[0] == EXIT_FAILURE
    assert "--conversation" in capsys.readouterr().err
    assert _cli(tmp_path, "agents", "add", "a", "--runner", "plugin:nobody/missing/x")[0] == EXIT_FAILURE
    assert "unknown_runner: runner_id" in capsys.readouterr().err
    wrong = _cli(tmp_path, "agents", "add", "a", "--runner", ECHO, "--runner-config", '{"prefix": 5}')
    assert wrong[0] == EXIT_FAILURE
    assert "invalid_runner_config: runner_config.prefix: expected a string" in capsys.readouterr().err
    wrong_bool = _cli(tmp_path, "agents", "add", "a", "--runner", ECHO, "--runner-config", '{"prefix": true}')
    assert wrong_bool[0] == EXIT_FAILURE and "runner_config.prefix" in capsys.readouterr().err
    ok = _cli(tmp_path, "agents", "add", "a", "--runner", ECHO, "--runner-config", '{"prefix": "> "}')
    assert ok[0] == EXIT_OK
    assert _cli(tmp_path, "agents", "list")[1].splitlines()[-1].startswith("a\t")


async def test_an_agent_for_an_unknown_runner_or_a_wrong_config_is_refused(client: httpx.AsyncClient) -> None:
    """``POST``/``PUT /v1/agents``: typed 422 naming the field; the agent is not stored; a fitting one is."""
    unknown = await client.post("/v1/agents", json={"agent_id": "a", "runner_id": "plugin:nobody/missing/x"})
    assert unknown.status_code == 422
    assert unknown.json()["error"]["code"] == "unknown_runner"
    assert unknown.json()["error"]["message"].startswith("runner_id: ")
    for config, field in (
        ({"prefix": 5}, "prefix"),
        ({"prefix": ["x"]}, "prefix"),
        ({"prefix": {"a": 1}}, "prefix"),
    ):
        wrong = await client.post(
            "/v1/agents", json={"agent_id": "a", "runner_id": ECHO, "runner_config": config}
        )
        assert wrong.status_code == 422, config
        assert wrong.json()["error"]["code"] == "invalid_runner_config"
        assert f"runner_config.{field}" in wrong.json()["error"]["message"]
    assert (await client.get("/v1/agents/a")).status_code == 404
    ok = await client.post(
        "/v1/agents", json={"agent_id": "a", "runner_id": ECHO, "runner_config": {"prefix": ">"}}
    )
    assert ok.status_code == 201
    env_ref = {"agent_id": "a", "runner_id": ECHO, "runner_config": {"prefix": {"env": "SOME_PREFIX"}}}
    assert (await client.put("/v1/agents/a", json=env_ref)).status_code == 200
    replaced = await client.put(
        "/v1/agents/a", json={"agent_id": "a", "runner_id": ECHO, "runner_config": {"prefix": 1}}
    )
    assert replaced.status_code == 422 and replaced.json()["error"]["code"] == "invalid_runner_config"


COZE = "plugin:langbot/coze-agent/default"
COZE_OK = {"api-key": {"env": "COZE_KEY"}, "bot-id": "7350000000000000000"}
DIFY = "plugin:langbot/dify-agent/default"
DASHSCOPE = "plugin:langbot/dashscope-agent/default"
DASHSCOPE_OK = {"api-key": {"env": "DASHSCOPE_KEY"}, "app-id": "app-1"}


@pytest.mark.parametrize(
    ("runner", "config", "field", "reason"),
    [
        (COZE, {"bot-id": "7"}, "api-key", "requires it"),
        (COZE, {"api-key": {"env": "COZE_KEY"}, "bot-id": ""}, "bot-id", "requires it"),
        (COZE, {**COZE_OK, "timeout": "120"}, "timeout", "expected a number"),
        (COZE, {**COZE_OK, "auto-save-history": "yes"}, "auto-save-history", "expected true or false"),
        (COZE, {**COZE_OK, "bot_id": "7"}, "bot_id", "not a field of runner"),
        (DIFY, {"api-key": {"env": "K"}, "app-type": "completion"}, "app-type", "expected one of chat"),
        (DASHSCOPE, {**DASHSCOPE_OK, "references-quote": 3}, "references-quote", "expected a string"),
    ],
)
async def test_the_whole_config_is_checked_against_the_form(
    client: httpx.AsyncClient, runner: str, config: dict[str, object], field: str, reason: str
) -> None:
    """Required fields, types, select options and unknown keys: 422 ``invalid_runner_config`` naming
    ``runner_config.<field>`` and why; nothing stored. A value under a field's alias is checked as it."""
    response = await client.post(
        "/v1/agents", json={"agent_id": "c", "runner_id": runner, "runner_config": config}
    )
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_runner_config"
    assert f"runner_config.{field}: " in error["message"] and reason in error["message"], error
    assert (await client.get("/v1/agents/c")).status_code == 404


@pytest.mark.parametrize(
    ("runner", "config"),
    [
        # a self-hosted base (the field is a string whose options are the two regions, as suggestions) and a
        # fractional timeout (the runner reads a number)
        (COZE, {**COZE_OK, "timeout": 1.5, "api-base": "http://127.0.0.1:9/gateway", "remove-think": True}),
        (COZE, {**COZE_OK, "api-base": "https://api.coze.com"}),
        # the legacy spelling migrate-config copies verbatim is the field's declared alias
        (DASHSCOPE, {**DASHSCOPE_OK, "references-quote": "Source:"}),
        (DIFY, {"api-key": {"env": "K"}, "app-type": "workflow", "timeout": 0.5}),
    ],
)
async def test_configs_the_official_runners_really_take_are_admitted(
    client: httpx.AsyncClient, runner: str, config: dict[str, object]
) -> None:
    """What the runners' own e2e suites configure passes: their forms state their real allowed values."""
    response = await client.post(
        "/v1/agents", json={"agent_id": "c", "runner_id": runner, "runner_config": config}
    )
    assert response.status_code == 201, response.text


def _item(name: str, type_: str, **kw: object) -> DynamicFormItemSchema:
    return DynamicFormItemSchema.model_validate({"name": name, "label": {"en_US": name}, "type": type_, **kw})


def test_form_rules_integers_aliases_and_suggestions() -> None:
    """An integer must be integral (``2.0`` is), a float any number; an alias counts as its field (a value
    there satisfies ``required``); a string's options are suggestions, a select's are the choices."""
    schema = [
        _item("turns", "integer"),
        _item("quote", "string", aliases=["legacy-quote"], required=True),
        _item("base", "string", options=[{"name": "https://a.example", "label": {"en_US": "a"}}]),
        _item("mode", "select", options=[{"name": "x", "label": {"en_US": "x"}}]),
        _item("timeout", "float"),
    ]
    ok = {"turns": 2.0, "legacy-quote": "q", "base": "http://elsewhere", "mode": "x", "timeout": 0.25}
    assert config_problems(schema, ok) == []
    bad = {"turns": 2.5, "base": 1, "mode": "y", "timeout": True, "other": 1}
    assert [str(p) for p in config_problems(schema, bad, runner_id="r")] == [
        "runner_config.turns: expected an integer",
        "runner_config.quote: r requires it",
        "runner_config.base: expected a string",
        "runner_config.mode: expected one of x",
        "runner_config.timeout: expected a number",
        "runner_config.other: not a field of r's form",
    ]
    assert config_problems([], {"anything": 1}) == []  # no form: the config is the runner's business


def test_the_cli_names_every_problem_of_the_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``agents add`` refuses the same, naming each field."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AGENTRUNNER_CONFIG", raising=False)
    code, _ = _cli(
        tmp_path, "agents", "add", "c", "--runner", COZE, "--runner-config", '{"timeout": "2.5", "x": 1}'
    )
    assert code == EXIT_FAILURE
    err = capsys.readouterr().err
    for field in ("api-key", "bot-id", "timeout", "x"):
        assert f"runner_config.{field}:" in err, err


async def test_agents_of_the_config_file_are_admitted_like_the_api_s(make_settings: SettingsFactory) -> None:
    """A configured agent whose config does not fit its runner's form stops the host at startup, every problem
    named with the agent (``agents[i] (id).runner_config.<field>: why``), as ``POST /v1/agents`` would refuse it;
    a fitting one (env references included) starts, and an agent of a runner that is not available is left to
    its runs (its plugin failure is reported by ``/readyz``)."""
    bad = (
        f'[[agents]]\nagent_id = "fine"\nrunner_id = "{ECHO}"\nrunner_config = {{ prefix = "> " }}\n'
        f'[[agents]]\nagent_id = "coze"\nrunner_id = "{COZE}"\n'
        'runner_config = { "api-key" = { env = "COZE_KEY" }, timeout = "2.5", bot_id = "7" }\n'
    )
    with pytest.raises(ConfigFileError, match=r"agents\[1\] \(coze\)") as refused:
        async with HostService.open(make_settings(bad)):
            pass
    problems = refused.value.problems
    assert problems == [
        f"agents[1] (coze).runner_config.bot-id: runner {COZE} requires it",
        "agents[1] (coze).runner_config.timeout: expected a number",
        f"agents[1] (coze).runner_config.bot_id: not a field of runner {COZE}'s form",
    ], problems
    good = (
        f'[[agents]]\nagent_id = "coze"\nrunner_id = "{COZE}"\n'
        'runner_config = { "api-key" = { env = "COZE_KEY" }, "bot-id" = "7350000000000000000", timeout = 2.5 }\n'
        '[[agents]]\nagent_id = "gone"\nrunner_id = "plugin:nobody/missing/x"\n'
    )
    async with HostService.open(make_settings(good)) as service:
        assert service.directory.agent("coze").source == "config"


def test_serve_refuses_to_start_with_an_agent_that_does_not_fit(tmp_path: Path) -> None:
    """The real ``serve`` process: exits non-zero before listening, and says which agent and field."""
    config = tmp_path / "agentrunner.toml"
    config.write_text(
        f'[[agents]]\nagent_id = "echoer"\nrunner_id = "{ECHO}"\nrunner_config = {{ prefix = 3 }}\n',
        encoding="utf-8",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTRUNNER_")}
    argv = [sys.executable, "-m", "agentrunner_host.cli", "serve", "--config", str(config), "--port", "0"]
    done = subprocess.run(
        [*argv, "--data-dir", str(tmp_path / "data")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0
    assert "agents[0] (echoer).runner_config.prefix: expected a string" in done.stderr, done.stderr
