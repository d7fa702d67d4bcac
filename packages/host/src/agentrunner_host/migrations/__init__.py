"""Alembic migrations of the host database, run with :func:`agentrunner_host.stores.engine.upgrade`."""
