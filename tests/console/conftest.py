"""The console's browser-test harness: ``agentrunner serve`` as a real child process on a free port (with an
API token, the echo runner bound to every message and the ``console-probe`` plugin), and Debian's
``chromium`` driven by Playwright with a fresh profile per test, recording every request it makes.

The tests skip only when chromium (or Playwright) is missing *and* this is not CI: with ``CI=true`` or
``AGENTRUNNER_REQUIRE_BROWSER=1`` a missing browser fails them. Screenshots go to
``$AGENTRUNNER_CONSOLE_SCREENSHOTS`` (``.ci/run`` sets it and prints where) or a temporary directory.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

import httpx
import pytest
from serve_ready import child_environ, serve_child

if TYPE_CHECKING:
    from playwright.sync_api import BrowserContext, Page, Playwright, Request

TOKEN: Final = "console-test-token-0123456789"
CHROMIUM: Final = Path(os.environ.get("AGENTRUNNER_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS: Final = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
PROBE_RUNNER: Final = "plugin:tests/console-probe/probe"
_PLUGINS: Final = Path(__file__).parent / "plugins"
_UI_TIMEOUT_MS: Final = 60_000

_CONFIG: Final = f"""
[runners]
plugin_dirs = ["{(_PLUGINS / "probe").as_posix()}"]

[[agents]]
agent_id = "echo"
runner_id = "plugin:agentrunner/echo/default"

[[agents]]
agent_id = "probe"
runner_id = "{PROBE_RUNNER}"

[[bindings]]
binding_id = "echo-everywhere"
agent_id = "echo"
event_types = ["message.received"]

[[bindings]]
binding_id = "probe-for-bot-9"
agent_id = "probe"
scope = {{ type = "bot", id = "bot-9" }}
event_types = ["message.received"]
"""


def _browser_required() -> bool:
    return (
        os.environ.get("CI", "").lower() in {"1", "true", "yes"}
        or os.environ.get("AGENTRUNNER_REQUIRE_BROWSER") == "1"
    )


@dataclass(frozen=True)
class ConsoleServer:
    """A running ``agentrunner serve``."""

    base: str
    """``http://127.0.0.1:<port>``."""
    token: str
    """Its API token."""
    root: Path
    """Its working directory (configuration, data, log)."""
    log: Path
    """Its output."""

    def api(self) -> httpx.Client:
        """An API client with the bearer token."""
        return httpx.Client(base_url=self.base, headers={"Authorization": f"Bearer {self.token}"}, timeout=30)


@contextlib.contextmanager
def serve(root: Path, config: str, *, env: Mapping[str, str] | None = None) -> Generator[ConsoleServer]:
    """``python -m agentrunner_host.cli serve`` in *root* with *config* and a token (plus *env*); stopped with
    SIGTERM, which must exit 0 with no traceback in its log."""
    (root / "agentrunner.toml").write_text(config, encoding="utf-8")
    log = root / "serve.log"
    env = child_environ({"AGENTRUNNER_API_TOKEN": TOKEN, **(env or {})})
    auth = {"Authorization": f"Bearer {TOKEN}"}
    # the configuration is ./agentrunner.toml of the working directory, as an operator's would be
    with serve_child(root / "data", log, env=env, cwd=root, headers=auth) as child:
        yield ConsoleServer(base=child.base, token=TOKEN, root=root, log=log)
        child.stop()
        assert "Traceback" not in log.read_text(), log.read_text()


@pytest.fixture(scope="module")
def console_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleServer]:
    """The console's usual server: echo bound to every message, the probe plugin bound to bot ``bot-9``.

    A test module that needs another configuration defines its own ``console_server`` with :func:`serve`;
    the ``browser`` fixture then drives that one."""
    with serve(tmp_path_factory.mktemp("console-server"), _CONFIG) as server:
        yield server


@pytest.fixture
def playwright() -> Iterator[Playwright]:
    """Playwright's driver (its own browsers are never downloaded: Debian's chromium is used).

    Function-scoped on purpose: while the sync API is open its event loop counts as running in this thread,
    which would break every asyncio test scheduled after it."""
    if not CHROMIUM.exists():
        message = f"no chromium at {CHROMIUM} (apt-get install chromium)"
        if _browser_required():
            pytest.fail(message + "; CI requires the browser tests")
        pytest.skip(message)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:  # pragma: no cover - a dev dependency
        if _browser_required():
            pytest.fail(f"playwright is not installed: {exc}")
        pytest.skip(f"playwright is not installed: {exc}")
    from playwright.sync_api import expect

    # expect() has its own 5 s default; a loaded CI machine needs the same generous bound as the pages.
    expect.set_options(timeout=_UI_TIMEOUT_MS)
    with sync_playwright() as driver:
        yield driver


@dataclass
class Browser:
    """A fresh chromium profile for one test, and every request it made."""

    context: BrowserContext
    server: ConsoleServer
    requests: list[str] = field(default_factory=list[str])

    def page(self, *, phone: bool = False) -> Page:
        """A new tab (phone-sized when *phone*)."""
        page = self.context.new_page()
        page.set_default_timeout(_UI_TIMEOUT_MS)
        if phone:
            page.set_viewport_size({"width": 390, "height": 844})
        return page

    def sign_in(self, page: Page, path: str = "/chat") -> None:
        """Open *path*; the console asks for the token once, then shows the page."""
        page.goto(self.server.base + path)
        page.wait_for_url("**/login?next=*")
        page.get_by_label("API token").fill(self.server.token)
        page.get_by_role("button", name="Sign in").click()
        target = self.server.base + path

        def arrived(url: str) -> bool:
            # The chat page writes its conversation into the query as it loads (history.replaceState), and a
            # loaded page may have done so before the wait looks: the page reached is *path* plus any query
            # the page adds itself. (CI once failed here with the page at /chat?conversation=...)
            return url == target or ("?" not in path and url.startswith(target + "?"))

        try:
            page.wait_for_url(arrived)
        except Exception as exc:
            # Say where the page was and what the login form said, what the browser asked for last (did the
            # POST /login and the page's GET leave?) and what the server logged, so one occurrence in CI is
            # enough to tell a slow page from a lost request.
            error = page.locator("#login-error")
            said = error.inner_text() if error.count() and error.is_visible() else "nothing"
            log = self.server.log.read_text(encoding="utf-8", errors="replace")[-4000:]
            raise AssertionError(
                f"sign-in did not reach {path}: the page is at {page.url}, the form said {said}; the last"
                f" requests: {self.requests[-12:]}; serve's log ends:\n{log}"
            ) from exc

    def foreign_requests(self) -> list[str]:
        """Requests for anything but the server itself."""
        own = urlsplit(self.server.base).netloc
        return [
            url
            for url in self.requests
            if not (url.startswith(("data:", "blob:", "about:")) or urlsplit(url).netloc == own)
        ]


@pytest.fixture
def browser(playwright: Playwright, console_server: ConsoleServer, tmp_path: Path) -> Generator[Browser]:
    """A browser with a fresh user-data-dir; after the test, no request may have left for another host."""
    context = playwright.chromium.launch_persistent_context(
        str(tmp_path / "profile"),
        executable_path=str(CHROMIUM),
        headless=True,
        args=list(CHROMIUM_ARGS),
        viewport={"width": 1280, "height": 860},
    )
    recorder = Browser(context=context, server=console_server)

    def record(request: Request) -> None:
        recorder.requests.append(request.url)

    context.on("request", record)
    try:
        yield recorder
    finally:
        context.close()
    assert recorder.foreign_requests() == [], "the console requested another host"


def _screenshot_dir() -> Path:
    configured = os.environ.get("AGENTRUNNER_CONSOLE_SCREENSHOTS")
    return Path(configured) if configured else Path(os.environ.get("TMPDIR", "/tmp")) / "agentrunner-console"


@pytest.fixture
def screenshot() -> Callable[[Page, str], Path]:
    """Saves a PNG of the viewport named *name* into the screenshot directory."""

    def take(page: Page, name: str) -> Path:
        folder = _screenshot_dir()
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{name}.png"
        page.screenshot(path=str(path))  # the viewport: what a person sees first
        return path

    return take
