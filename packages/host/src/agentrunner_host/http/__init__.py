"""The HTTP API of the host (Starlette): events, runs, results (JSON and SSE), runners, agents, bindings,
transcripts, health; an OpenAPI 3.1 document generated from the same models; and the web console at ``/``
(:mod:`agentrunner_host.http.console`)."""

from .app import API_TITLE, create_app
from .errors import ApiError
from .openapi import Endpoint, Param, build_openapi
from .routes import ENDPOINTS, MAX_BODY_BYTES
from .server import serve

__all__ = (
    "create_app",
    "serve",
    "ENDPOINTS",
    "API_TITLE",
    "MAX_BODY_BYTES",
    "ApiError",
    "Endpoint",
    "Param",
    "build_openapi",
)
