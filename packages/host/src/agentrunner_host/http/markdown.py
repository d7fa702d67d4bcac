"""``docs/http-api.md``: the endpoint reference rendered from the OpenAPI document.

Regenerate with ``python -m agentrunner_host.http.markdown > docs/http-api.md``; a test fails when the file
and the document disagree.
"""

from __future__ import annotations

import sys
from typing import Any

from .app import API_TITLE
from .openapi import build_openapi
from .routes import ENDPOINTS

__all__ = ["render", "render_current"]


def _ref_name(schema: dict[str, Any]) -> str:
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return f"`{ref.rsplit('/', 1)[-1]}`"
    return f"`{schema.get('type', 'object')}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(document: dict[str, Any]) -> str:
    """Markdown for every operation: parameters, request body and answers."""
    lines = [
        "# HTTP API reference",
        "",
        "<!-- Generated from the OpenAPI document by `python -m agentrunner_host.http.markdown`; do not edit. -->",
        "",
        f"{document['info']['title']} {document['info']['version']}, OpenAPI {document['openapi']}. The document itself "
        "is served at `/openapi.json`; the operator guide ([operators.md](operators.md)) explains the behaviour. "
        "With a token configured every operation also answers `401`.",
        "",
    ]
    by_tag: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            by_tag.setdefault(operation["tags"][0], []).append((method.upper(), path, operation))
    for tag, operations in by_tag.items():
        lines += [f"## {tag}", ""]
        for method, path, operation in operations:
            lines += [f"### `{method} {path}`", "", _cell(operation["summary"]), ""]
            params = operation.get("parameters", [])
            if params:
                lines += ["| parameter | in | type | description |", "|---|---|---|---|"]
                for p in params:
                    lines.append(
                        f"| `{p['name']}` | {p['in']} | {_ref_name(p['schema'])} | {_cell(p['description'])} |"
                    )
                lines.append("")
            body = operation.get("requestBody")
            if body:
                lines += [
                    f"Request body: {_ref_name(body['content']['application/json']['schema'])} (JSON).",
                    "",
                ]
            lines += ["| status | body | meaning |", "|---|---|---|"]
            for status, answer in operation["responses"].items():
                content = answer.get("content", {})
                kinds = [
                    _ref_name(media["schema"]) if name == "application/json" else "SSE events"
                    for name, media in content.items()
                ]
                lines.append(f"| {status} | {' or '.join(kinds) or '—'} | {_cell(answer['description'])} |")
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def render_current() -> str:
    """The reference of this build's API (as served without a token)."""
    return render(build_openapi(ENDPOINTS, title=API_TITLE, version="v1", secured=False))


if __name__ == "__main__":
    sys.stdout.write(render_current())
