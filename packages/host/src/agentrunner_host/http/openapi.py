"""The OpenAPI 3.1 document, generated from the endpoint table and the pydantic models the routes use."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema
from starlette.requests import Request
from starlette.responses import Response

from .schemas import ErrorBody

__all__ = ["SSE_EVENT_SCHEMA", "Endpoint", "Handler", "Param", "build_openapi"]

Handler = Callable[[Request], Awaitable[Response]]

SSE_EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "One result: `id` is its host_seq, `event` its type, `data` the result as JSON.",
    "required": ["id", "event", "data"],
    "properties": {
        "id": {"type": "string", "pattern": "^[1-9][0-9]*$"},
        "event": {"type": "string", "minLength": 1},
        "data": {"type": "string", "contentMediaType": "application/json"},
    },
}
"""What the document says about each Server-Sent Event."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Param:
    """A query, path or header parameter."""

    name: str
    """Name."""
    where: Literal["query", "path", "header"]
    """Location (OpenAPI ``in``)."""
    schema: dict[str, Any]
    """JSON Schema of the value."""
    description: str
    """What it does."""
    required: bool = False
    """Required (path parameters always are)."""
    slashes: bool = False
    """A path parameter whose values contain ``/`` (runner ids): routed with Starlette's ``path`` convertor,
    so it matches both ``/`` and ``%2F``."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Endpoint:
    """One route: its handler and everything the OpenAPI document says about it."""

    method: str
    """HTTP method."""
    path: str
    """Path template (``{name}`` for path parameters)."""
    handler: Handler
    """Starlette handler."""
    operation_id: str
    """OpenAPI ``operationId``."""
    summary: str
    """One line for the document."""
    tag: str
    """Group in the document."""
    body: type[BaseModel] | None = None
    """Request body model (validated strictly)."""
    responses: dict[int, tuple[type[BaseModel] | None, str]]
    """Status → (body model, description)."""
    params: tuple[Param, ...] = ()
    """Parameters."""
    sse_status: int | None = None
    """The status that may answer ``text/event-stream`` instead of JSON."""

    @property
    def route_path(self) -> str:
        """The Starlette path of the route (``path`` with its convertors)."""
        path = self.path
        for param in self.params:
            if param.where == "path" and param.slashes:
                path = path.replace("{" + param.name + "}", "{" + param.name + ":path}")
        return path


def build_openapi(
    endpoints: Sequence[Endpoint], *, title: str, version: str, secured: bool
) -> dict[str, Any]:
    """The document. Error answers share the ``ErrorBody`` schema; 401 appears when a token is configured."""
    wanted: list[tuple[type[BaseModel], JsonSchemaMode]] = [(ErrorBody, "serialization")]
    for ep in endpoints:
        if ep.body is not None:
            wanted.append((ep.body, "validation"))
        wanted.extend((model, "serialization") for model, _ in ep.responses.values() if model is not None)
    unique = list(dict.fromkeys(wanted))
    refs, defs = models_json_schema(unique, ref_template="#/components/schemas/{model}")
    paths: dict[str, dict[str, Any]] = {}
    for ep in endpoints:
        responses: dict[str, Any] = {}
        statuses = dict(ep.responses)
        if secured:
            statuses.setdefault(401, (ErrorBody, "Missing or invalid bearer token."))
        if ep.body is not None or ep.params:
            statuses.setdefault(422, (ErrorBody, "Invalid request."))
        # The request guard answers these on every route (see docs/security.md).
        statuses.setdefault(403, (ErrorBody, "The request's Origin is not allowed (`forbidden_origin`)."))
        statuses.setdefault(421, (ErrorBody, "The Host is not served here (`misdirected_request`)."))
        if ep.method in {"POST", "PUT", "PATCH", "DELETE"}:
            statuses.setdefault(415, (ErrorBody, "The body is not `application/json`."))
        if ep.body is not None:
            statuses.setdefault(408, (ErrorBody, "The body did not arrive in time."))
        for status, (model, description) in sorted(statuses.items()):
            entry: dict[str, Any] = {"description": description}
            content: dict[str, Any] = {}
            if model is not None:
                mode: JsonSchemaMode = "serialization"
                content["application/json"] = {"schema": refs[(model, mode)]}
            if status == ep.sse_status:
                # OpenAPI 3.1 reads ``schema`` of an event stream as the schema of one event.
                content["text/event-stream"] = {"schema": SSE_EVENT_SCHEMA}
            if content:
                entry["content"] = content
            responses[str(status)] = entry
        operation: dict[str, Any] = {
            "operationId": ep.operation_id,
            "summary": ep.summary,
            "tags": [ep.tag],
            "responses": responses,
        }
        if ep.params:
            operation["parameters"] = [
                {
                    "name": p.name,
                    "in": p.where,
                    "required": p.required or p.where == "path",
                    "description": p.description,
                    "schema": p.schema,
                }
                for p in ep.params
            ]
        if ep.body is not None:
            operation["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": refs[(ep.body, "validation")]}},
            }
        if secured:
            operation["security"] = [{"bearer": []}]
        paths.setdefault(ep.path, {})[ep.method.lower()] = operation
    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": title, "version": version},
        "paths": paths,
        "components": {"schemas": defs.get("$defs", {})},
    }
    if secured:
        document["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
    return document
