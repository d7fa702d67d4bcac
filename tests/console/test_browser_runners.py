"""The runners page in a real browser: disable a runner with the switch and see the next event refused.
Its own module, so it gets its own server (the switch would refuse the other browser tests' events)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from playwright.sync_api import Page

from .conftest import Browser

ECHO = "plugin:agentrunner/echo/default"


def test_the_switch_disables_a_runner_and_the_next_event_is_refused(
    browser: Browser, screenshot: Callable[[Page, str], Path]
) -> None:
    """Disable echo from its card with a reason; the page shows it disabled with the reason; an event is
    refused with 403 runner_disabled; Enable turns it back on."""
    page = browser.page()
    browser.sign_in(page, "/runners")
    card = page.locator(f'section[data-runner="{ECHO}"]')
    card.get_by_label("Reason").fill("browser test pause")
    # The switch reloads the page once the API answered. Waiting for that navigation (to its load event) and
    # not only for the new page's elements matters: the elements are there before the page's module script
    # has run, and a click in between would submit the bare form instead of calling the API.
    with page.expect_navigation():
        card.get_by_role("button", name="Disable").click()
    page.locator(f'section[data-runner="{ECHO}"] [data-reason]').wait_for()
    assert "browser test pause" in card.inner_text()
    screenshot(page, "runners")
    with browser.server.api() as client:
        refused = client.post("/v1/events", json={"input": {"text": "hi"}})
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"]["code"] == "runner_disabled"
    with page.expect_navigation():
        card.get_by_role("button", name="Enable").click()
    page.locator(f'section[data-runner="{ECHO}"] form[data-action="disable"]').wait_for()
    with browser.server.api() as client:
        assert client.post("/v1/events?wait=true", json={"input": {"text": "hi"}}).status_code == 200
