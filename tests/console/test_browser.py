"""The console in a real headless chromium against ``agentrunner serve`` as a child process (conftest.py).

Every test also checks, through the ``browser`` fixture, that the page requested nothing from any host but
the server itself. Screenshots of each page land in the screenshot directory (see conftest.py).
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Page, Request, expect

from .conftest import Browser

# generous: the first test also waits for serve to start, and CI runs the suite on a loaded 2-core machine
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

Shot = Callable[[Page, str], Path]


def _png(width: int = 8, height: int = 8) -> bytes:
    """A small valid PNG (solid colour), made here so the test needs no image file."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"".join(b"\x00" + b"\x33\x88\xcc" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def _ready(page: Page) -> None:
    page.wait_for_selector("#chat[data-ready=true]")


def _send(page: Page, text: str, *, agent: str | None = None) -> None:
    if agent is not None:
        page.select_option("#agent", agent)
    page.fill("#text", text)
    page.press("#text", "Enter")  # the keyboard path: Enter sends


def _last_reply(page: Page):
    return page.locator(".msg.assistant").last


def test_the_token_is_asked_once_and_the_pages_work_by_keyboard(browser: Browser, screenshot: Shot) -> None:
    page = browser.page()
    page.goto(browser.server.base + "/runs")
    page.wait_for_url("**/login?next=*")
    screenshot(page, "login")
    page.get_by_label("API token").fill("not the token")
    page.keyboard.press("Enter")
    expect(page.locator("#login-error")).to_be_visible()
    page.get_by_label("API token").fill(browser.server.token)
    page.keyboard.press("Enter")
    page.wait_for_url(browser.server.base + "/runs")
    # The cookie is HttpOnly: the page's scripts cannot read it.
    assert page.evaluate("document.cookie") == ""
    # A second tab of the same browser is signed in already.
    other = browser.page()
    other.goto(browser.server.base + "/chat")
    _ready(other)
    # Keyboard: the skip link comes first, the navigation follows.
    other.keyboard.press("Tab")
    assert other.evaluate("document.activeElement.className") == "skip"
    other.keyboard.press("Tab")
    other.keyboard.press("Tab")
    assert other.evaluate("document.activeElement.dataset.nav") == "chat"
    other.keyboard.press("Tab")
    other.keyboard.press("Enter")
    other.wait_for_url(browser.server.base + "/runs")


def test_chat_with_echo_streams_the_reply(browser: Browser, screenshot: Shot) -> None:
    page = browser.page()
    browser.sign_in(page)
    _ready(page)
    streams: list[Request] = []
    page.on("request", lambda r: streams.append(r) if "/v1/events" in r.url else None)
    _send(page, "hello from **chromium**, a reply long enough to stream in several deltas")
    reply = _last_reply(page)
    expect(reply.locator(".event.terminal")).to_have_attribute("data-outcome", "completed")
    expect(reply.locator(".segment strong")).to_have_text("chromium")
    expect(reply.locator(".segment")).to_have_text(
        "hello from chromium, a reply long enough to stream in several deltas"
    )
    assert [r.headers.get("accept") for r in streams] == ["text/event-stream"]
    screenshot(page, "chat-echo")


def test_a_binding_scope_picks_the_binding(browser: Browser) -> None:
    page = browser.page()
    browser.sign_in(page)
    _ready(page)
    page.get_by_text("Binding scope").click()
    page.get_by_label("Bot id").fill("bot-9")
    _send(page, "nonsense")  # through the bindings: the bot's binding sends it to the probe, which refuses it
    terminal = _last_reply(page).locator(".event.terminal")
    expect(terminal).to_have_attribute("data-code", "probe.unknown")
    run_id = _last_reply(page).get_attribute("data-run")
    with browser.server.api() as api:
        assert api.get(f"/v1/runs/{run_id}").json()["binding_id"] == "probe-for-bot-9"


def test_send_an_image(browser: Browser) -> None:
    page = browser.page()
    browser.sign_in(page)
    _ready(page)
    page.set_input_files("#file", files=[{"name": "dot.png", "mimeType": "image/png", "buffer": _png()}])
    _send(page, "a picture")
    reply = _last_reply(page)
    expect(reply.locator(".event.terminal")).to_have_attribute("data-outcome", "completed")
    expect(reply.locator(".segment")).to_have_text("a picture [1 attachment]")
    image = page.locator(".msg.user img.attachment").last
    expect(image).to_be_visible()
    page.wait_for_function("img => img.complete && img.naturalWidth === 8", arg=image.element_handle())


def test_cancel_a_slow_run(browser: Browser) -> None:
    page = browser.page()
    browser.sign_in(page)
    _ready(page)
    _send(page, "hang", agent="probe")
    reply = _last_reply(page)
    expect(reply.locator(".segment")).to_have_text("working")
    page.get_by_role("button", name="Cancel run").click()
    terminal = reply.locator(".event.terminal")
    expect(terminal).to_have_attribute("data-code", "cancelled")
    expect(terminal).to_contain_text("run.failed · cancelled")
    expect(page.get_by_role("button", name="Send")).to_be_enabled()


def test_reload_mid_stream_resumes_from_the_last_event_without_duplicates(
    browser: Browser, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    page = browser.page()
    browser.sign_in(page)
    _ready(page)
    _send(page, f"gate {gate}", agent="probe")
    expect(_last_reply(page).locator(".segment")).to_have_text("part one")
    # The run is still live (it waits for the gate): the reloaded page must resume its stream.
    with page.expect_request(lambda r: "/results" in r.url) as resumed:
        page.reload()
    _ready(page)
    reply = _last_reply(page)
    expect(reply.locator(".segment")).to_have_text("part one")
    # two deltas were shown (kept as one folded entry): the stream resumes after the second
    assert resumed.value.headers.get("last-event-id") == "2"
    gate.write_bytes(b"go")  # blocks until the runner reads: it is waiting
    expect(reply.locator(".event.terminal")).to_have_attribute("data-outcome", "completed")
    expect(reply.locator(".segment")).to_have_text("part one part two")
    # The user's message is shown once, from the transcript.
    expect(page.locator(".msg.user")).to_have_count(1)
    expect(page.locator(".msg.assistant")).to_have_count(1)


def test_hostile_markdown_renders_inert(browser: Browser) -> None:
    page = browser.page()
    browser.sign_in(page)
    _ready(page)
    _send(page, "xss", agent="probe")
    reply = _last_reply(page)
    expect(reply.locator(".event.terminal")).to_have_attribute("data-outcome", "completed")
    body = reply.locator(".segment")
    expect(body).to_contain_text("<script>window.__probe_xss = 1</script>")  # shown as text
    assert body.locator("script, img, iframe, [onerror]").count() == 0
    assert page.locator("a[href^='javascript:' i]").count() == 0
    expect(body.get_by_role("link", name="ok link")).to_have_attribute("href", "https://example.org/")
    # the foreign image became a link: nothing was fetched from 203.0.113.9 (also checked by the fixture)
    expect(body.get_by_role("link", name="tracker")).to_be_visible()
    for link in body.locator("a").all():
        link.click(modifiers=["Alt"]) if False else None
    assert page.evaluate("window.__probe_xss") is None
    assert browser.foreign_requests() == []


def test_tool_calls_state_artifacts_terminal_and_transcript(browser: Browser, screenshot: Shot) -> None:
    page = browser.page()
    browser.sign_in(page)
    _ready(page)
    conversation = page.input_value("#conversation")
    _send(page, "tools", agent="probe")
    reply = _last_reply(page)
    expect(reply.locator(".event.terminal")).to_have_attribute("data-outcome", "completed")
    tool = reply.locator(".event.tool")
    expect(tool).to_contain_text("lookup")
    expect(tool).to_contain_text("done")
    tool.locator("summary").click()
    expect(tool.locator(".tool-params")).to_contain_text('"query": "weather"')
    expect(tool.locator(".tool-result")).to_contain_text('"top": "sunny"')
    expect(reply.locator(".event.state")).to_contain_text("conversation:probe.calls = 1")
    expect(reply.locator(".segment strong")).to_have_text("done")
    with page.expect_download() as download:
        reply.locator(".event.artifact a").click()
    saved = Path(download.value.path())
    assert saved.read_bytes() == b"probe report\n"
    assert download.value.suggested_filename == "report.txt"
    screenshot(page, "chat")
    # Reopen the conversation later: its transcript comes back with the run's tool call, state update,
    # artifact and terminal replayed from the stored results, not only its messages.
    page.get_by_role("button", name="New conversation").click()
    expect(page.locator(".msg")).to_have_count(0)
    page.fill("#conversation", conversation)
    page.get_by_role("button", name="Open transcript").click()
    expect(page.locator(".msg.user")).to_have_text("you" + "tools")
    reopened = page.locator(".msg.assistant")
    expect(reopened).to_have_count(1)
    expect(reopened).to_have_attribute("data-replayed", "true")
    expect(reopened.locator(".segment")).to_contain_text("tools done")
    tool = reopened.locator(".event.tool")
    expect(tool).to_contain_text("lookup")
    expect(tool).to_contain_text("done")
    tool.locator("summary").click()
    expect(tool.locator(".tool-params")).to_contain_text('"query": "weather"')
    expect(tool.locator(".tool-result")).to_contain_text('"top": "sunny"')
    expect(reopened.locator(".event.state")).to_contain_text("conversation:probe.calls = 1")
    expect(reopened.locator(".event.artifact a")).to_have_text("⬇ report.txt")
    expect(reopened.locator(".event.terminal")).to_have_attribute("data-outcome", "completed")
    screenshot(page, "chat-reopened")


def test_runs_list_filters_and_detail(browser: Browser, screenshot: Shot) -> None:
    with browser.server.api() as api:
        done = api.post(
            "/v1/events?wait=true", json={"text": "for the runs page", "conversation_id": "runs-ui"}
        )
        run_id = done.json()["run"]["run_id"]
        failed = api.post(
            "/v1/events?wait=true",
            json={"text": "nonsense", "conversation_id": "runs-ui", "agent_id": "probe"},
        )
        failed_id = failed.json()["run"]["run_id"]
    page = browser.page()
    browser.sign_in(page, "/runs")
    expect(page.locator(f"tr[data-run='{run_id}']")).to_be_visible()
    page.select_option("#f-status", "failed")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**/runs?*status=failed*")
    expect(page.locator(f"tr[data-run='{failed_id}']")).to_contain_text("failed: probe.unknown")
    expect(page.locator(f"tr[data-run='{run_id}']")).to_have_count(0)
    screenshot(page, "runs")
    page.goto(browser.server.base + f"/runs/{run_id}")
    expect(page.locator("#run-status")).to_have_text("completed")
    expect(page.locator("#timeline tbody tr").first).to_contain_text("1")
    expect(page.locator("#timeline")).to_contain_text("run.completed")
    expect(page.locator("#snapshot")).to_contain_text("deadline_at")
    expect(page.locator("#audit")).to_contain_text("state.get")
    expect(page.locator("#events")).to_contain_text("message.received")
    screenshot(page, "run-detail")
    phone = browser.page(phone=True)
    phone.goto(browser.server.base + f"/runs/{run_id}")
    expect(phone.locator("#run-status")).to_be_visible()
    # nothing wider than the phone's screen but the scrollable tables
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot(phone, "run-detail-phone")
    phone.goto(browser.server.base + "/chat")
    _ready(phone)
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot(phone, "chat-phone")
