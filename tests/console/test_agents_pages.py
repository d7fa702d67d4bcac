"""The agents and bindings pages over HTTP, in process: the form generated from a runner's
``DynamicFormItemSchema`` (widgets, required, defaults, labels in the reader's language, the host's models
in the selectors), secret fields that take a variable name and never show a value back, read-only agents
and bindings from the configuration file, and the bindings listed in precedence order. The browser tests
are in test_browser_agents.py."""

from __future__ import annotations

import html as html_lib
import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from agentrunner import DynamicFormItemSchema, I18nObject
from agentrunner_host.config import load_settings
from agentrunner_host.definitions import AgentConfig
from agentrunner_host.http import create_app
from agentrunner_host.http.console.forms import form_fields
from agentrunner_host.service import HostService

TOKEN = "console-token-0123456789"
BASE = "http://127.0.0.1:8420"
ORIGIN = {"Origin": BASE}
LOCAL_AGENT = "plugin:langbot/local-agent/default"
DIFY = "plugin:langbot/dify-agent/default"

_CONFIG = f"""
[[models]]
id = "fake-llm"
base_url = "http://127.0.0.1:9/v1"
model = "fake-model"

[[models]]
id = "fake-rerank"
base_url = "http://127.0.0.1:9/v1"
model = "fake-rerank"
model_type = "rerank"

[[agents]]
agent_id = "from-file"
runner_id = "{DIFY}"
runner_config = {{ base-url = "https://dify.example/v1", api-key = {{ env = "FILE_DIFY_KEY" }} }}

[[bindings]]
binding_id = "file-global"
agent_id = "from-file"

[[bindings]]
binding_id = "file-bot"
agent_id = "from-file"
scope = {{ type = "bot", id = "b1" }}
"""


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    (tmp_path / "agentrunner.toml").write_text(_CONFIG, encoding="utf-8")
    settings = load_settings(
        tmp_path / "agentrunner.toml",
        environ={"AGENTRUNNER_DATA_DIR": str(tmp_path / "data"), "FILE_DIFY_KEY": "x", "DIFY_KEY": "y"},
        cwd=tmp_path,
    )
    async with HostService.open(settings) as service:
        # an agent stored before admission checked whole configs (the API refuses an undeclared key now)
        legacy = {"base-url": "https://dify.example/v1", "legacy-key": "kept"}
        await service.directory.put_agent(
            AgentConfig(agent_id="legacy", runner_id=DIFY, runner_config=legacy), create=True
        )
        app = create_app(service, api_token=TOKEN)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as c:
            signed = await c.post("/login", json={"token": TOKEN}, headers=ORIGIN)
            assert signed.status_code == 204, signed.text
            yield c


def _field(page: str, name: str) -> str:
    """The markup of one generated field."""
    found = re.search(rf'<div class="field" data-field data-name="{re.escape(name)}".*?</div>', page, re.S)
    assert found is not None, f"no field {name!r}"
    return found.group(0)


async def test_the_local_agent_form_is_generated_from_its_schema(client: httpx.AsyncClient) -> None:
    """Each form item becomes its widget with its label, default and required mark; the model selectors offer
    the host's models of the right type."""
    page = await client.get("/agents/new", params={"runner": LOCAL_AGENT})
    assert page.status_code == 200, page.text
    assert page.headers["content-security-policy"].startswith("default-src 'none'")
    html = page.text
    assert f'data-runner="{LOCAL_AGENT}"' in html
    model = _field(html, "model")
    assert 'data-kind="model-fallback"' in model and "data-required" in model
    assert '<option value="fake-llm">' in model and "fake-rerank" not in model
    rerank = _field(html, "rerank-model")
    assert (
        'data-kind="model"' in rerank
        and '<option value="fake-rerank">' in rerank
        and "fake-llm" not in rerank
    )
    turns = _field(html, "history-turns")
    assert 'data-kind="integer"' in turns and 'value="10"' in turns and ">History turns<" in turns
    think = _field(html, "remove-think")
    assert 'data-kind="boolean"' in think and 'type="checkbox"' in think and "checked" not in think
    prompt = html[html.index('data-name="prompt"') : html.index('data-name="knowledge-bases"')]
    assert 'data-kind="prompt"' in prompt and "data-message-template" in prompt
    row = re.search(r"<div class=\"message-row\" data-message>.*?</div>", prompt, re.S)
    assert row is not None and "<option selected>system</option>" in row.group(0)
    assert "You are a helpful assistant." in html_lib.unescape(row.group(0))
    # the runner picker lists the installed runners
    assert f'<option value="{DIFY}"' in html


async def test_labels_follow_the_readers_language(client: httpx.AsyncClient) -> None:
    """The form's i18n labels: Chinese for a browser preferring it or ``?lang=zh_Hans``, English otherwise."""
    chinese = await client.get(
        "/agents/new", params={"runner": LOCAL_AGENT}, headers={"Accept-Language": "zh-CN"}
    )
    assert ">历史轮数<" in _field(chinese.text, "history-turns")
    asked = await client.get("/agents/new", params={"runner": LOCAL_AGENT, "lang": "zh_Hans"})
    assert ">历史轮数<" in _field(asked.text, "history-turns")
    english = await client.get("/agents/new", params={"runner": LOCAL_AGENT, "lang": "fr"})
    assert ">History turns<" in _field(english.text, "history-turns")


async def test_a_secret_field_takes_a_variable_name_and_never_shows_a_value(
    client: httpx.AsyncClient,
) -> None:
    """Saved with an env reference (as the page's script sends it), the edit page shows the variable's name;
    a literal secret is refused; an agent from the file is read-only and keeps keys its form lacks."""
    literal = await client.post(
        "/v1/agents",
        json={"agent_id": "d1", "runner_id": DIFY, "runner_config": {"api-key": "app-0123456789abcdef0123"}},
        headers=ORIGIN,
    )
    assert literal.status_code == 422 and literal.json()["error"]["code"] == "literal_secret"
    made = await client.post(
        "/v1/agents",
        json={
            "agent_id": "d1",
            "runner_id": DIFY,
            "runner_config": {"base-url": "https://dify.example/v1", "api-key": {"env": "DIFY_KEY"}},
        },
        headers=ORIGIN,
    )
    assert made.status_code == 201, made.text
    edit = (await client.get("/agents/d1/edit")).text
    secret = _field(edit, "api-key")
    assert 'data-kind="secret"' in secret and 'value="DIFY_KEY"' in secret
    assert 'id="save"' in edit and "readonly" in edit  # editable; the id cannot change

    from_file = (await client.get("/agents/from-file/edit")).text
    assert 'value="FILE_DIFY_KEY"' in _field(from_file, "api-key")
    assert (
        'id="read-only"' in from_file and 'id="save"' not in from_file and "<fieldset disabled>" in from_file
    )
    # a key the form does not declare (an agent stored before whole-config admission) is kept in "other keys"
    assert "legacy-key" in html_lib.unescape((await client.get("/agents/legacy/edit")).text)


async def test_the_local_agents_default_prompt_is_admitted(client: httpx.AsyncClient) -> None:
    """A prompt-editor value is a list of messages (the runner's own default), so the form's default saves;
    something else is refused naming the field."""
    made = await client.post(
        "/v1/agents",
        json={
            "agent_id": "helper",
            "runner_id": LOCAL_AGENT,
            "runner_config": {
                "model": {"primary": "fake-llm", "fallbacks": []},
                "prompt": [{"role": "system", "content": "You are a helpful assistant."}],
            },
        },
        headers=ORIGIN,
    )
    assert made.status_code == 201, made.text
    wrong = await client.post(
        "/v1/agents",
        json={"agent_id": "helper-2", "runner_id": LOCAL_AGENT, "runner_config": {"prompt": [{"role": 1}]}},
        headers=ORIGIN,
    )
    assert wrong.status_code == 422 and "runner_config.prompt" in wrong.json()["error"]["message"]
    listed = (await client.get("/agents")).text
    assert 'data-agent="helper"' in listed and 'href="/chat?agent=helper"' in listed
    row = re.search(r'<tr data-agent="from-file">.*?</tr>', listed, re.S)
    assert (
        row is not None and "configuration file" in row.group(0) and "file-global, file-bot" in row.group(0)
    )


async def test_bindings_are_listed_in_precedence_order_with_the_rule(client: httpx.AsyncClient) -> None:
    """The bot binding is tried before the global one; the page explains the order; a binding from the file
    opens read-only; an unknown id is 404."""
    page = (await client.get("/bindings")).text
    assert page.index('data-binding="file-bot"') < page.index('data-binding="file-global"')
    assert "conversation, then actor, then bot, then workspace, then global" in page
    edit = (await client.get("/bindings/file-bot/edit")).text
    assert 'id="read-only"' in edit and "<option selected>bot</option>" in edit and 'value="b1"' in edit
    assert (await client.get("/bindings/nope/edit")).status_code == 404
    assert (await client.get("/agents/nope/edit")).status_code == 404
    new = (await client.get("/bindings/new", params={"agent": "from-file"})).text
    assert "<option selected>from-file</option>" in new


def test_a_stored_literal_secret_is_never_put_in_the_form() -> None:
    """A secret field holding a literal (a runner may mark a field secret whose name looks harmless, so the
    file check cannot catch it) is rendered empty with a note; an env reference shows its variable."""
    item = DynamicFormItemSchema(
        name="app-code", type="string", label=I18nObject(en_US="App code"), secret=True
    )
    [literal] = form_fields([item], {"app-code": "s3cr3t-literal-value"}, locale="en_US")
    [ref] = form_fields([item], {"app-code": {"env": "APP_CODE"}}, locale="en_US")
    assert literal.kind == "secret" and literal.text == "" and "literal value is stored" in literal.note
    assert "s3cr3t" not in repr(literal)
    assert ref.text == "APP_CODE" and ref.note == ""


def test_a_prompt_that_is_not_a_message_list_is_kept_as_json() -> None:
    """The prompt editor takes a list of role/content messages; a string prompt (or one with other keys)
    is shown as JSON so saving it again changes nothing."""
    item = DynamicFormItemSchema(name="prompt", type="prompt-editor", label=I18nObject(en_US="Prompt"))
    [editor] = form_fields([item], {"prompt": [{"role": "user", "content": "hi"}]}, locale="en_US")
    assert editor.kind == "prompt" and editor.messages == (("user", "hi"),)
    [text] = form_fields([item], {"prompt": "be brief"}, locale="en_US")
    assert text.kind == "json" and text.text == '"be brief"'
    [extra] = form_fields([item], {"prompt": [{"role": "user", "content": "x", "name": "n"}]}, locale="en_US")
    assert extra.kind == "json"
