"""Data at rest and logs: the data directory is 0700, every file in it 0600 (database, WAL, SHM, artifacts,
agents, cursor key); SQL parameters never reach the logs; known secrets are masked in every log record;
``agentrunner serve`` at debug level logs neither message text nor secrets."""

from __future__ import annotations

import logging
import secrets
import stat
from pathlib import Path
from typing import Any

import httpx
import pytest
from agentrunner import codec as json
from agentrunner_host.config import load_settings
from agentrunner_host.redaction import SecretLogFilter, known_secrets, secret_variables
from agentrunner_host.service import HostService
from agentrunner_host.stores.artifacts import ArtifactOwner

from .conftest import SettingsFactory, client_for
from .isolation import serving

SENTINEL = "SENTINEL-" + secrets.token_hex(16)


def _modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): stat.S_IMODE(p.stat().st_mode) for p in root.rglob("*") if p.is_file()}


async def test_the_data_directory_and_every_file_in_it_are_private(make_settings: SettingsFactory) -> None:
    """After a run, an artifact and an operator-added agent: data dir 0700, all files owner-only."""
    settings = make_settings()
    async with HostService.open(settings) as service, client_for(service) as client:
        assert (await client.post("/v1/events?wait=true", json={"text": "x"})).status_code == 200
        created = await client.post(
            "/v1/agents", json={"agent_id": "a", "runner_id": "plugin:agentrunner/echo/default"}
        )
        assert created.status_code == 201
        await service.stores.artifacts.put(
            b"bytes", mime_type="text/plain", name="a.txt", source="runner", owner=ArtifactOwner(run_id="r")
        )
        data = settings.data_dir
        assert stat.S_IMODE(data.stat().st_mode) == 0o700
        modes = _modes(data)
        assert {"agentrunner.db", "agentrunner.db-wal", "agentrunner.db-shm"} <= set(modes)
        assert any(name.startswith("artifacts") for name in modes)
        loose = {name: oct(mode) for name, mode in modes.items() if mode & 0o077}
        assert loose == {}


async def test_an_existing_loose_data_directory_and_database_are_tightened(
    make_settings: SettingsFactory,
) -> None:
    """A data dir and database created before (0755/0644) are made private when the host opens them."""
    settings = make_settings()
    settings.data_dir.mkdir(mode=0o755)
    settings.data_dir.chmod(0o755)
    database = settings.data_dir / "agentrunner.db"
    database.touch()
    database.chmod(0o644)
    async with HostService.open(settings):
        pass
    assert stat.S_IMODE(settings.data_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(database.stat().st_mode) == 0o600


def test_known_secrets_cover_every_reference_of_the_configuration(tmp_path: Path) -> None:
    """The token, database password, ``*_env`` / ``env_from`` / ``headers_from`` / env refs, and every
    secret-named variable are known; so are the variables they live in."""
    config = tmp_path / "agentrunner.toml"
    config.write_text(
        "[[models]]\nid = 'm'\nmodel_type = 'llm'\nmodel = 'x'\nbase_url = 'http://127.0.0.1:1'\n"
        "api_key_env = 'MODEL_KEY'\n"
        "[[agents]]\nagent_id = 'a'\nrunner_id = 'plugin:agentrunner/echo/default'\n"
        "runner_config = { prefix = { env = 'PREFIX_VALUE' } }\n",
        encoding="utf-8",
    )
    env = {
        "AGENTRUNNER_DATA_DIR": str(tmp_path / "data"),
        "AGENTRUNNER_API_TOKEN": "token-" + SENTINEL,
        "AGENTRUNNER_DATABASE_URL": f"postgresql+asyncpg://u:pw-{SENTINEL}@127.0.0.1/db",
        "MODEL_KEY": "model-" + SENTINEL,
        "PREFIX_VALUE": "prefix-" + SENTINEL,
        "SOME_SECRET": "other-" + SENTINEL,
        "PLAIN": "not-a-secret-value",
    }
    settings = load_settings(config, environ=env, cwd=tmp_path)
    values = known_secrets(settings)
    for name in ("AGENTRUNNER_API_TOKEN", "MODEL_KEY", "PREFIX_VALUE", "SOME_SECRET"):
        assert env[name] in values, name
    assert f"pw-{SENTINEL}" in values
    assert "not-a-secret-value" not in values
    assert {"AGENTRUNNER_API_TOKEN", "AGENTRUNNER_DATABASE_URL", "MODEL_KEY", "PREFIX_VALUE"} <= set(
        secret_variables(settings)
    )


def test_the_log_filter_masks_known_secrets_in_messages_arguments_and_tracebacks() -> None:
    """A record carrying a secret in its format arguments or its exception is written masked."""
    records: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(self.format(record))

    handler = Collect()
    handler.addFilter(SecretLogFilter([SENTINEL]))
    logger = logging.getLogger("tests.security.redaction")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("calling with key=%s", SENTINEL)
        try:
            raise RuntimeError(f"upstream refused {SENTINEL}")
        except RuntimeError:
            logger.exception("failed")
        logger.info("Authorization: Bearer abcdefghijklmnop")
    finally:
        logger.removeHandler(handler)
    text = "\n".join(records)
    assert SENTINEL not in text and "abcdefghijklmnop" not in text
    assert "RuntimeError" in text and "***" in text


async def test_sql_parameters_never_reach_the_logs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """At DEBUG, with SQLAlchemy's statement logging switched on too, and in a driver error: the bound value
    appears nowhere (the driver's per-call debug records are dropped, SQLAlchemy hides parameters)."""
    from agentrunner_host.stores.engine import create_engine
    from sqlalchemy import text
    from sqlalchemy.exc import SQLAlchemyError

    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'x.db'}")
    statements = logging.getLogger("sqlalchemy.engine")
    previous = statements.level
    statements.setLevel(logging.DEBUG)
    try:
        with caplog.at_level(logging.DEBUG):
            async with engine.connect() as conn:
                await conn.execute(text("select :value"), {"value": SENTINEL})
                with pytest.raises(SQLAlchemyError, match="no such table: missing") as caught:
                    await conn.execute(text("select * from missing where x = :value"), {"value": SENTINEL})
    finally:
        statements.setLevel(previous)
        await engine.dispose()
    assert "select" in caplog.text.lower()  # statements were logged...
    assert SENTINEL not in caplog.text  # ...their parameters were not
    assert SENTINEL not in str(caught.value)


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("level", ["info", "debug"])
def test_serve_logs_no_message_text_sql_parameter_or_secret(tmp_path: Path, level: str) -> None:
    """``agentrunner serve`` at info and debug: an event whose text holds the secret value (a user pasting
    a key) and a distinctive message; neither appears in the log, although SQL statements do at debug."""
    data_dir = tmp_path / "data"
    config = tmp_path / "agentrunner.toml"
    config.write_text(f"log_level = '{level}'\n", encoding="utf-8")
    token = "tok-" + secrets.token_urlsafe(32)
    log = tmp_path / "serve.log"
    marker = "MESSAGE-TEXT-" + secrets.token_hex(8)
    env = {"AGENTRUNNER_API_TOKEN": token, "PROVIDER_API_KEY": SENTINEL}
    with serving(config, data_dir, log, env=env) as (base, _pid):
        headers = {"Authorization": f"Bearer {token}"}
        for text in (marker, f"my key is {SENTINEL}"):
            answer = httpx.post(
                f"{base}/v1/events?wait=true", json={"text": text}, headers=headers, timeout=60
            )
            assert answer.status_code == 200
    written = log.read_text(encoding="utf-8", errors="replace")
    assert SENTINEL not in written and token not in written
    assert marker not in written
    files = [p for p in data_dir.rglob("*") if p.is_file()]
    assert files and all(stat.S_IMODE(p.stat().st_mode) & 0o077 == 0 for p in files)


async def test_known_secrets_are_masked_in_results_transcripts_and_the_database(
    make_settings: SettingsFactory,
) -> None:
    """An agent whose config takes a secret from the environment (``{ env = "VAR" }``) and whose runner
    echoes it: the live answer, the stored results, the transcript and the database files hold ``***``."""
    settings = make_settings(
        "[[agents]]\nagent_id = 'leaky'\nrunner_id = 'plugin:agentrunner/echo/default'\n"
        "runner_config = { prefix = { env = 'LEAKY_PREFIX' } }\n"
        "[[bindings]]\nbinding_id = 'leaky'\nagent_id = 'leaky'\n"
        "scope = { type = 'conversation', id = 'leak' }\n",
        environ={"LEAKY_PREFIX": SENTINEL + ": "},  # the whole value is the secret: masked as one
    )
    async with HostService.open(settings) as service, client_for(service) as client:
        answer = await client.post("/v1/events?wait=true", json={"text": "hello", "conversation_id": "leak"})
        assert answer.status_code == 200
        assert SENTINEL not in answer.text and "***hello" in answer.text
        run_id = answer.json()["run"]["run_id"]
        stored = await client.get(f"/v1/runs/{run_id}/results")
        assert SENTINEL not in stored.text and "***hello" in stored.text
        transcript = await client.get("/v1/conversations/leak/transcript")
        assert SENTINEL not in transcript.text and "***hello" in transcript.text
    for path in settings.data_dir.rglob("*"):
        if path.is_file():
            assert SENTINEL.encode() not in path.read_bytes(), path


def _deltas(results: list[dict[str, Any]]) -> list[str]:
    return [str(r["data"]["chunk"]["content"] or "") for r in results if r["type"] == "message.delta"]


async def test_a_secret_split_across_deltas_is_masked_where_served_and_stored(
    make_settings: SettingsFactory,
) -> None:
    """The echo runner streams its reply in 16-character deltas, so the 43-character secret prefix spans
    three of them: no delivered or stored delta holds any part of it, and the deltas still add up to the
    masked reply (the tail held back in case it began a secret is released before the final message)."""
    secret = SENTINEL + ": "
    settings = make_settings(
        "[[agents]]\nagent_id = 'leaky'\nrunner_id = 'plugin:agentrunner/echo/default'\n"
        "runner_config = { prefix = { env = 'LEAKY_PREFIX' } }\n"
        "[[bindings]]\nbinding_id = 'leaky'\nagent_id = 'leaky'\n"
        "scope = { type = 'conversation', id = 'leak' }\n",
        environ={"LEAKY_PREFIX": secret},
    )
    text = "hello there, this reply is long enough to stream in several pieces"
    async with HostService.open(settings) as service, client_for(service) as client:
        answer = await client.post("/v1/events?stream=true", json={"text": text, "conversation_id": "leak"})
        assert answer.status_code == 200
        served = [json.loads(line[6:]) for line in answer.text.splitlines() if line.startswith("data: ")]
        run_id = served[0]["run_id"]
        stored_items = (await client.get(f"/v1/runs/{run_id}/results")).json()["results"]
        stored = [item["result"] for item in stored_items]
    for results in (served, stored):
        deltas = _deltas(results)
        assert len(deltas) >= 4, results
        assert "".join(deltas) == "***" + text
        for content in deltas:
            # not even a piece of the secret: no chunk holds a part of SENTINEL's random half
            assert not any(SENTINEL[i : i + 4] in content for i in range(9, len(SENTINEL) - 4)), content
    for path in settings.data_dir.rglob("*"):
        if path.is_file():
            assert SENTINEL[9:].encode() not in path.read_bytes(), path
