"""Tests of the host stores, the engine factory, the migrations and the pull APIs (on SQLite and PostgreSQL)."""
