"""The runners page: ``/runners`` lists every installed runner with its capabilities, permissions, protocol
version, manifest warnings, process status (warm, restarts), risk badge with its reasons, and the
per-runner disable switch (``static/js/runners.js`` writes it through ``PUT``/``DELETE
/v1/runners/{runner_id}/disabled``). Plugins that failed to load are listed with their reason.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Final

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agentrunner_host.service import HostService

from .pages import ConsolePage, NavEntry, render

__all__ = ["PAGE"]


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


async def runners_page(request: Request) -> Response:
    """``GET /runners``."""
    service: HostService = request.app.state.service
    views = await service.runner_views()
    rows = [
        {
            "view": v,
            "label": v.descriptor.manifest.label.en_US or v.descriptor.runner_id,
            "capabilities": [
                name for name, on in v.descriptor.manifest.capabilities.model_dump().items() if on is True
            ],
        }
        for v in views
    ]
    return render(
        request,
        "runners.html",
        {"rows": rows, "failed": service.plugin_failures(), "when": _when},
        current="runners",
        title="Runners",
    )


PAGE: Final = ConsolePage(
    nav=NavEntry(slug="runners", label="Runners", href="/runners"),
    routes=(Route("/runners", runners_page, methods=["GET"]),),
)
"""The runners page."""
