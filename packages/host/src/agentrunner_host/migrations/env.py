"""Alembic environment: runs on the connection handed over by :func:`agentrunner_host.stores.engine.upgrade`."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from agentrunner_host.stores.tables import Base, include_name

_connection = context.config.attributes.get("connection")
if not isinstance(_connection, Connection):
    raise RuntimeError("run the host migrations through agentrunner_host.stores.engine.upgrade(engine)")

context.configure(
    connection=_connection,
    target_metadata=Base.metadata,
    include_name=include_name,
    render_as_batch=True,
)
with context.begin_transaction():
    context.run_migrations()
