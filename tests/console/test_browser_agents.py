"""The agents and bindings pages in a real browser: create an agent from the local-agent runner's generated
form, chat with it against a fake OpenAI-compatible model server on loopback (which records what it is
sent), and bind it with the conflict check shown before saving.

Its own module with its own ``serve`` (a ``[[models]]`` entry pointing at the fake), through the
``console_server`` override below; the ``browser`` fixture still fails the test on any request to another
host.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fakes_openai import FakeOpenAIServer
from playwright.sync_api import Page, expect

from .conftest import Browser, ConsoleServer, serve

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

Shot = Callable[[Page, str], Path]
LOCAL_AGENT = "plugin:langbot/local-agent/default"
FAKE_KEY = "sk-fake-console-test-key-0123456789"
"""The model's API key, handed to serve in ``FAKE_MODEL_KEY`` (the config names the variable only)."""
SYSTEM_PROMPT = "You are the console test assistant."


class ThreadedFakeModel:
    """:class:`FakeOpenAIServer` on its own event loop in a thread, so the synchronous Playwright test can
    script it (queue replies) and read what it recorded."""

    def __init__(self) -> None:
        self.server = FakeOpenAIServer()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fake-openai", daemon=True)

    def __enter__(self) -> FakeOpenAIServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self._loop).result(timeout=60)
        return self.server

    def __exit__(self, *exc_info: object) -> None:
        try:
            asyncio.run_coroutine_threadsafe(self.server.stop(), self._loop).result(timeout=60)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)
            self._loop.close()


@pytest.fixture(scope="module")
def fake_model() -> Iterator[FakeOpenAIServer]:
    """The fake model server (loopback, a free port)."""
    with ThreadedFakeModel() as server:
        yield server


@pytest.fixture(scope="module")
def console_server(
    tmp_path_factory: pytest.TempPathFactory, fake_model: FakeOpenAIServer
) -> Iterator[ConsoleServer]:
    """serve with one model on the fake server and the echo agent bound to every message."""
    config = f"""
[[models]]
id = "fake-llm"
base_url = "{fake_model.base_url}"
model = "fake-model-1"
api_key_env = "FAKE_MODEL_KEY"

[[agents]]
agent_id = "echo"
runner_id = "plugin:agentrunner/echo/default"

[[bindings]]
binding_id = "echo-everywhere"
agent_id = "echo"
event_types = ["message.received"]
"""
    with serve(tmp_path_factory.mktemp("agents-server"), config, env={"FAKE_MODEL_KEY": FAKE_KEY}) as server:
        yield server


def test_create_a_local_agent_from_its_form_and_chat_with_it(
    browser: Browser, fake_model: FakeOpenAIServer, screenshot: Shot
) -> None:
    """The local-agent form is generated from its schema (labels, defaults, the host's model in the model
    selector); the saved agent holds typed values; the chat's reply comes from the fake model, which was
    sent the configured model name, the prompt from the form, the user's text and the key from the env."""
    page = browser.page()
    browser.sign_in(page, "/agents")
    page.get_by_role("link", name="New agent").click()
    page.wait_for_url("**/agents/new")
    page.select_option("#runner", LOCAL_AGENT)  # the page shows the chosen runner's form at once
    page.wait_for_url("**/agents/new?runner=*")
    form = page.locator("#agent-form")
    expect(form).to_have_attribute("data-runner", LOCAL_AGENT)
    # labels and defaults from the runner's DynamicFormItemSchema
    expect(page.get_by_label("History turns")).to_have_value("10")
    expect(page.get_by_label("Remove thinking")).not_to_be_checked()
    expect(form.locator('[data-name="model"]')).to_have_attribute("data-required", "")
    page.get_by_label("Agent id").fill("helper")
    page.get_by_label("Label").fill("Console helper")
    form.locator('[data-name="model"] select[data-part="primary"]').select_option("fake-llm")
    # the prompt editor: the default system message is there; replace its text and add a user example
    prompt = form.locator('[data-name="prompt"]')
    expect(prompt.locator("[data-message]")).to_have_count(1)
    prompt.locator('[data-message] [data-part="content"]').fill(SYSTEM_PROMPT)
    prompt.get_by_role("button", name="Add message").click()
    expect(prompt.locator("[data-message]")).to_have_count(2)
    added = prompt.locator("[data-message]").nth(1)
    added.locator('[data-part="role"]').select_option("user")
    added.locator('[data-part="content"]').fill("Answer in one sentence.")
    page.get_by_label("History turns").fill("3")
    page.evaluate("window.scrollTo(0, 0)")
    screenshot(page, "agent-form")
    page.get_by_role("button", name="Create agent").click()
    page.wait_for_url("**/agents?saved=helper")
    row = page.locator('tr[data-agent="helper"]')
    expect(row).to_contain_text(LOCAL_AGENT)
    expect(row).to_contain_text("the host (API)")
    screenshot(page, "agents")

    with browser.server.api() as api:
        stored = api.get("/v1/agents/helper").json()["agent"]
    assert stored["runner_id"] == LOCAL_AGENT
    assert stored["label"] == "Console helper"
    config = stored["runner_config"]
    assert config["model"] == {"primary": "fake-llm", "fallbacks": []}
    assert config["prompt"] == [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": "Answer in one sentence."},
    ]
    assert config["history-turns"] == 3  # a number, not the input's text
    assert config["remove-think"] is False

    fake_model.reply("Hello from the **fake model**.")
    row.get_by_role("link", name="Chat").click()
    page.wait_for_selector("#chat[data-ready=true]")
    expect(page.locator("#agent")).to_have_value("helper")
    page.fill("#text", "what are you?")
    page.press("#text", "Enter")
    reply = page.locator(".msg.assistant").last
    expect(reply.locator(".event.terminal")).to_have_attribute("data-outcome", "completed")
    expect(reply.locator(".segment")).to_have_text("Hello from the fake model.")
    expect(reply.locator(".segment strong")).to_have_text("fake model")
    screenshot(page, "chat-local-agent")

    chats = [r for r in fake_model.requests if r.path == "/v1/chat/completions"]
    assert len(chats) == 1, chats
    body = chats[0].body
    assert body["model"] == "fake-model-1"
    messages = body["messages"]
    assert messages[0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert messages[1] == {"role": "user", "content": "Answer in one sentence."}
    assert messages[-1]["role"] == "user" and "what are you?" in str(messages[-1]["content"])
    assert chats[0].headers["authorization"] == f"Bearer {FAKE_KEY}"

    # and delete it from its edit page (after confirming)
    page.goto(browser.server.base + "/agents/helper/edit")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete agent").click()
    page.wait_for_url(browser.server.base + "/agents")
    expect(page.locator('tr[data-agent="helper"]')).to_have_count(0)


def test_a_conflicting_binding_is_shown_before_saving_and_a_good_one_is_saved(
    browser: Browser, screenshot: Shot
) -> None:
    """A second global binding for message.received ties with echo-everywhere: the form shows the conflict
    from POST /v1/bindings/check and saves nothing; scoped to a bot it ranks first and is saved."""
    page = browser.page()
    browser.sign_in(page, "/bindings")
    expect(page.locator('tr[data-binding="echo-everywhere"]')).to_contain_text("configuration file")
    page.get_by_role("link", name="New binding").click()
    page.wait_for_url("**/bindings/new")
    page.get_by_label("Binding id").fill("echo-twice")
    page.get_by_label("Agent").select_option("echo")
    page.get_by_role("button", name="Create binding").click()
    check = page.locator("#check")
    expect(check).to_have_attribute("data-ok", "false")
    expect(check.locator('[data-conflict="echo-everywhere"]')).to_be_visible()
    check.scroll_into_view_if_needed()
    screenshot(page, "binding-conflict")
    with browser.server.api() as api:
        assert api.get("/v1/bindings/echo-twice").status_code == 404  # nothing was written

    page.get_by_label("Scope", exact=True).select_option("bot")
    page.get_by_label("Scope id").fill("bot-7")
    expect(check).to_have_attribute("data-ok", "true")
    expect(check.locator("#check-order li").first).to_contain_text("echo-twice")
    page.get_by_role("button", name="Create binding").click()
    page.wait_for_url("**/bindings?saved=echo-twice")
    rows = page.locator("#bindings tbody tr")
    expect(rows.first).to_have_attribute("data-binding", "echo-twice")  # bot scope is tried before global
    screenshot(page, "bindings")
    with browser.server.api() as api:
        saved = api.get("/v1/bindings/echo-twice").json()["binding"]
    assert saved["scope"] == {"type": "bot", "id": "bot-7"}

    # the binding can be deleted from its edit page
    page.goto(browser.server.base + "/bindings/echo-twice/edit")
    expect(check).to_have_attribute("data-ok", "true")  # an edit is checked as it opens
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete binding").click()
    page.wait_for_url(browser.server.base + "/bindings")
    expect(page.locator('tr[data-binding="echo-twice"]')).to_have_count(0)
    with browser.server.api() as api:
        assert api.get("/v1/bindings/echo-twice").status_code == 404


def test_the_agent_and_binding_forms_fit_a_phone(browser: Browser, screenshot: Shot) -> None:
    """At 390 px the generated form and the bindings table are no wider than the screen (wide tables
    scroll inside their frame)."""
    page = browser.page(phone=True)
    browser.sign_in(page, f"/agents/new?runner={LOCAL_AGENT}")
    expect(page.locator("#agent-form")).to_have_attribute("data-runner", LOCAL_AGENT)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot(page, "agent-form-phone")
    page.goto(browser.server.base + "/bindings")
    expect(page.locator("#bindings")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
