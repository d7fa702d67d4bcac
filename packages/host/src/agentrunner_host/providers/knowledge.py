"""Knowledge bases behind ``knowledge.retrieve``: text and Markdown files in an embedded full-text index.

Files are chunked by headings and paragraphs (at most ``chunk_chars`` characters per chunk, file name and
heading kept as metadata) and indexed with the database's own full-text engine:

* **SQLite** — an FTS5 table ranked by ``bm25``. The index lives in its **own file**
  (``<data_dir>/knowledge.db``), not in the host database: FTS5 virtual tables and bulk re-indexing would
  otherwise compete with the stores' single writer and sit outside their Alembic chain.
* **PostgreSQL** — a ``tsvector`` column with a GIN index, ranked by ``ts_rank_cd``, in tables of the host
  database named ``kb_*``. They are created by :meth:`KnowledgeIndex.prepare` with ``IF NOT EXISTS`` under
  an advisory lock, so the stores' Alembic chain stays untouched; the index is derived data that
  :meth:`EmbeddedKnowledge.sync` can always rebuild from the files.

Queries are reduced to word tokens and passed as bound parameters (quoted FTS5 phrases, or
``plainto_tsquery`` on PostgreSQL), so no query text is ever interpreted as full-text syntax. Chinese,
Japanese and Korean text is indexed character by character and queried by character bigrams.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import logging
import re
from collections.abc import AsyncGenerator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final, cast

from agentrunner import (
    InvalidArgumentError,
    KnowledgeBaseResource,
    KnowledgeRetrieveResult,
    ModelResource,
    NotFoundError,
)
from agentrunner import codec as json
from agentrunner.actions import KnowledgeRetrieveParams, ModelRerankParams
from agentrunner.api_types import KnowledgeHit
from agentrunner.codec import JsonObject
from pydantic import BaseModel, ConfigDict, Field, JsonValue
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from agentrunner_host.access import RunAccess
from agentrunner_host.providers.protocols import ModelProvider
from agentrunner_host.stores.engine import SQLITE_BEGIN_OPTION, create_engine

__all__ = [
    "KNOWLEDGE_DB_FILE_NAME",
    "MAX_TOP_K",
    "SUPPORTED_SUFFIXES",
    "Chunk",
    "EmbeddedKnowledge",
    "KnowledgeBaseConfig",
    "KnowledgeIndex",
    "chunk_document",
    "query_tokens",
]

log = logging.getLogger("agentrunner.host.knowledge")

KNOWLEDGE_DB_FILE_NAME: Final = "knowledge.db"
"""File of the SQLite knowledge index inside the data directory."""

MAX_TOP_K: Final = 50
"""Most passages one retrieval returns."""

SUPPORTED_SUFFIXES: Final = frozenset({".md", ".markdown", ".txt", ".text"})
"""Files a knowledge base ingests."""

_MAX_QUERY_TOKENS: Final = 32
_FILTER_KEY: Final = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_CJK: Final = re.compile(r"([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff])")
_WORD: Final = re.compile(r"\w+", re.UNICODE)
_HEADING: Final = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$")
_FENCE: Final = re.compile(r"^[ \t]*(```|~~~)")


class KnowledgeBaseConfig(BaseModel):
    """One knowledge base: the files it is built from and how it is searched."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    id: str = Field(min_length=1, max_length=200)
    """Id runners see (``KnowledgeBaseResource.kb_id``)."""
    name: str | None = None
    """Display name."""
    description: str | None = None
    """What it holds (shown to runners and models)."""
    paths: list[Path] = []
    """Files and directories to ingest (``.md``, ``.markdown``, ``.txt``; directories recursively)."""
    chunk_chars: int = Field(default=1200, ge=200, le=20_000)
    """Largest chunk, in characters."""
    rerank_model_id: str | None = None
    """A configured rerank model that reorders the full-text candidates."""
    rerank_candidates: int = Field(default=20, ge=1, le=200)
    """Full-text candidates handed to the reranker."""

    def resource(self) -> KnowledgeBaseResource:
        """The catalog entry (operations are granted per run by the snapshot)."""
        return KnowledgeBaseResource(
            kb_id=self.id, name=self.name or self.id, description=self.description, kb_type="fulltext"
        )


@dataclass(frozen=True, slots=True)
class Chunk:
    """One indexed passage of a document."""

    text: str
    """Passage text."""
    heading: str | None
    """Nearest heading (Markdown), if any."""
    section: str | None
    """Heading path, ``"A > B"``."""


# -- chunking ----------------------------------------------------------------------------------------------


def _split_long(paragraph: str, limit: int) -> list[str]:
    if len(paragraph) <= limit:
        return [paragraph]
    pieces: list[str] = []
    rest = paragraph
    while len(rest) > limit:
        window = rest[:limit]
        # prefer a sentence end, then any whitespace, then a hard cut
        cut = max(window.rfind(". "), window.rfind("。"), window.rfind("\n"))
        if cut < limit // 2:
            cut = window.rfind(" ")
        if cut < limit // 2:
            cut = limit - 1
        pieces.append(rest[: cut + 1].strip())
        rest = rest[cut + 1 :].lstrip()
    if rest:
        pieces.append(rest)
    return [p for p in pieces if p]


def _pack(paragraphs: Iterable[str], limit: int) -> list[str]:
    chunks: list[str] = []
    current = ""
    for paragraph in paragraphs:
        for piece in _split_long(paragraph, limit):
            if current and len(current) + 2 + len(piece) > limit:
                chunks.append(current)
                current = piece
            else:
                current = f"{current}\n\n{piece}" if current else piece
    if current:
        chunks.append(current)
    return chunks


def _paragraphs(lines: list[str]) -> list[str]:
    out: list[str] = []
    block: list[str] = []
    for line in lines:
        if line.strip():
            block.append(line.rstrip())
        elif block:
            out.append("\n".join(block))
            block = []
    if block:
        out.append("\n".join(block))
    return out


def chunk_document(content: str, *, markdown: bool, max_chars: int = 1200) -> list[Chunk]:
    """Split a document into chunks: by Markdown headings (outside code fences), then by paragraphs packed
    up to *max_chars*; an over-long paragraph is cut at a sentence or word boundary."""
    lines = content.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    sections: list[tuple[list[str], list[str]]] = []  # (heading path, body lines)
    path: list[tuple[int, str]] = []
    body: list[str] = []
    in_fence = False
    for line in lines:
        if markdown and _FENCE.match(line):
            in_fence = not in_fence
        match = _HEADING.match(line) if markdown and not in_fence else None
        if match is None:
            body.append(line)
            continue
        sections.append(([t for _, t in path], body))
        level, title = len(match.group(1)), match.group(2).strip()
        path = [(lv, t) for lv, t in path if lv < level] + [(level, title)]
        body = []
    sections.append(([t for _, t in path], body))
    chunks: list[Chunk] = []
    for headings, section_lines in sections:
        for piece in _pack(_paragraphs(section_lines), max_chars):
            chunks.append(
                Chunk(
                    text=piece,
                    heading=headings[-1] if headings else None,
                    section=" > ".join(headings) if headings else None,
                )
            )
    return chunks


# -- tokenising ----------------------------------------------------------------------------------------------


def _segment(value: str) -> str:
    """Space out CJK characters so every full-text engine sees each one as a token."""
    return _CJK.sub(r" \1 ", value)


def query_tokens(query: str) -> list[str]:
    """The search terms of a free-text query: words, and CJK character bigrams (single characters for a
    lone one). Each term is later bound as data, never spliced into full-text syntax."""
    terms: list[str] = []
    cjk_run: list[str] = []

    def flush() -> None:
        if len(cjk_run) == 1:
            terms.append(cjk_run[0])
        terms.extend(f"{a} {b}" for a, b in itertools.pairwise(cjk_run))
        cjk_run.clear()

    for run in re.split(r"[^\w]+", query):
        for part in re.split(_CJK, run):
            if not part:
                continue
            if _CJK.fullmatch(part):
                cjk_run.append(part)
                continue
            flush()
            terms.extend(w.lower() for w in _WORD.findall(part))
        flush()
    seen: dict[str, None] = {}
    for term in terms:
        seen.setdefault(term, None)
    return list(seen)[:_MAX_QUERY_TOKENS]


def _fts5_query(terms: Sequence[str]) -> str:
    # every term is a quoted phrase; tokens are \w only, but double quotes are escaped all the same
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


# -- the index -------------------------------------------------------------------------------------------------


_SQLITE_SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS kb_documents (
        kb_id TEXT NOT NULL, document_id TEXT NOT NULL, digest TEXT NOT NULL, chunks INTEGER NOT NULL,
        PRIMARY KEY (kb_id, document_id))""",
    """CREATE TABLE IF NOT EXISTS kb_chunks (
        id INTEGER PRIMARY KEY, kb_id TEXT NOT NULL, document_id TEXT NOT NULL, ordinal INTEGER NOT NULL,
        text TEXT NOT NULL, metadata TEXT NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS ix_kb_chunks_document ON kb_chunks (kb_id, document_id)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS kb_chunks_fts USING fts5(body, tokenize = 'unicode61 remove_diacritics 2')",
)

_PG_SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS kb_documents (
        kb_id VARCHAR(200) NOT NULL, document_id VARCHAR(1000) NOT NULL, digest VARCHAR(64) NOT NULL,
        chunks INTEGER NOT NULL, PRIMARY KEY (kb_id, document_id))""",
    """CREATE TABLE IF NOT EXISTS kb_chunks (
        id BIGSERIAL PRIMARY KEY, kb_id VARCHAR(200) NOT NULL, document_id VARCHAR(1000) NOT NULL,
        ordinal INTEGER NOT NULL, text TEXT NOT NULL, metadata JSONB NOT NULL, tsv TSVECTOR NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS ix_kb_chunks_document ON kb_chunks (kb_id, document_id)",
    "CREATE INDEX IF NOT EXISTS ix_kb_chunks_tsv ON kb_chunks USING GIN (tsv)",
    "CREATE INDEX IF NOT EXISTS ix_kb_chunks_metadata ON kb_chunks USING GIN (metadata jsonb_path_ops)",
)

_PG_LOCK_KEY: Final = 0x6B6E6F77  # advisory lock id of schema creation ("know")


@dataclass(frozen=True, slots=True)
class _Row:
    document_id: str
    text: str
    metadata: JsonObject
    score: float


class KnowledgeIndex:
    """The full-text index of every knowledge base, on SQLite (FTS5) or PostgreSQL (tsvector + GIN)."""

    def __init__(
        self, engine: AsyncEngine, *, owns_engine: bool = False, text_search_config: str = "simple"
    ) -> None:
        self.engine = engine
        """The engine holding the index."""
        self.dialect: str = engine.dialect.name
        """``sqlite`` or ``postgresql``."""
        if self.dialect not in ("sqlite", "postgresql"):
            raise ValueError(f"the knowledge index needs SQLite or PostgreSQL, not {self.dialect}")
        self._owns_engine = owns_engine
        self._ts_config = text_search_config
        self._write_lock = asyncio.Lock()

    @classmethod
    async def open(cls, host_engine: AsyncEngine, *, data_dir: Path) -> KnowledgeIndex:
        """The index for a host: its own SQLite file under *data_dir* when the host runs on SQLite, the host
        database itself on PostgreSQL. Tables are created when missing."""
        if host_engine.dialect.name == "sqlite":
            await asyncio.to_thread(data_dir.mkdir, parents=True, exist_ok=True)
            url = f"sqlite+aiosqlite:///{(data_dir / KNOWLEDGE_DB_FILE_NAME).resolve()}"
            index = cls(create_engine(url), owns_engine=True)
        else:
            index = cls(host_engine)
        await index.prepare()
        return index

    async def prepare(self) -> None:
        """Create the index tables when missing (idempotent, safe to run concurrently)."""
        async with self._write() as conn:
            if self.dialect == "postgresql":
                await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY})
                statements = _PG_SCHEMA
            else:
                statements = _SQLITE_SCHEMA
            for statement in statements:
                await conn.exec_driver_sql(statement)

    async def aclose(self) -> None:
        """Dispose the engine when the index created it."""
        if self._owns_engine:
            await self.engine.dispose()

    @asynccontextmanager
    async def _write(self) -> AsyncGenerator[AsyncConnection]:
        async with self._write_lock, self.engine.connect() as conn:
            if self.dialect == "sqlite":
                await conn.execution_options(**{SQLITE_BEGIN_OPTION: "IMMEDIATE"})
            async with conn.begin():
                yield conn

    # -- writes ----------------------------------------------------------------------------------------------

    async def digest(self, kb_id: str, document_id: str) -> str | None:
        """The content digest of an indexed document, or ``None``."""
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(
                    text("SELECT digest FROM kb_documents WHERE kb_id = :kb AND document_id = :doc"),
                    {"kb": kb_id, "doc": document_id},
                )
            ).first()
        return None if row is None else str(row[0])

    async def documents(self, kb_id: str) -> list[str]:
        """Ids of the documents indexed in a knowledge base."""
        async with self.engine.connect() as conn:
            rows = (
                await conn.execute(
                    text("SELECT document_id FROM kb_documents WHERE kb_id = :kb ORDER BY document_id"),
                    {"kb": kb_id},
                )
            ).all()
        return [str(r[0]) for r in rows]

    async def replace(
        self,
        kb_id: str,
        document_id: str,
        chunks: Sequence[Chunk],
        *,
        digest: str,
        metadata: Mapping[str, JsonValue],
    ) -> None:
        """Replace a document's chunks (one transaction: readers see the old or the new version)."""
        async with self._write() as conn:
            await self._delete(conn, kb_id, document_id)
            for ordinal, chunk in enumerate(chunks):
                meta: JsonObject = {**metadata, "chunk": ordinal}
                if chunk.heading is not None:
                    meta["heading"] = chunk.heading
                    meta["section"] = chunk.section
                indexed = _segment(f"{chunk.section or ''}\n{chunk.text}")
                params = {
                    "kb": kb_id,
                    "doc": document_id,
                    "ord": ordinal,
                    "text": chunk.text,
                    "meta": json.dumps_str(meta),
                    "body": indexed,
                    "cfg": self._ts_config,
                }
                if self.dialect == "postgresql":
                    await conn.execute(
                        text(
                            "INSERT INTO kb_chunks (kb_id, document_id, ordinal, text, metadata, tsv) VALUES "
                            "(:kb, :doc, :ord, :text, CAST(:meta AS JSONB), to_tsvector(CAST(:cfg AS regconfig), :body))"
                        ),
                        params,
                    )
                else:
                    result = await conn.execute(
                        text(
                            "INSERT INTO kb_chunks (kb_id, document_id, ordinal, text, metadata) "
                            "VALUES (:kb, :doc, :ord, :text, :meta)"
                        ),
                        params,
                    )
                    await conn.execute(
                        text("INSERT INTO kb_chunks_fts (rowid, body) VALUES (:id, :body)"),
                        {"id": result.lastrowid, "body": indexed},
                    )
            await conn.execute(
                text(
                    "INSERT INTO kb_documents (kb_id, document_id, digest, chunks) VALUES (:kb, :doc, :digest, :n)"
                ),
                {"kb": kb_id, "doc": document_id, "digest": digest, "n": len(chunks)},
            )

    async def remove(self, kb_id: str, document_id: str) -> None:
        """Drop a document from the index."""
        async with self._write() as conn:
            await self._delete(conn, kb_id, document_id)

    async def _delete(self, conn: AsyncConnection, kb_id: str, document_id: str) -> None:
        keys = {"kb": kb_id, "doc": document_id}
        if self.dialect == "sqlite":
            await conn.execute(
                text(
                    "DELETE FROM kb_chunks_fts WHERE rowid IN "
                    "(SELECT id FROM kb_chunks WHERE kb_id = :kb AND document_id = :doc)"
                ),
                keys,
            )
        await conn.execute(text("DELETE FROM kb_chunks WHERE kb_id = :kb AND document_id = :doc"), keys)
        await conn.execute(text("DELETE FROM kb_documents WHERE kb_id = :kb AND document_id = :doc"), keys)

    # -- search ----------------------------------------------------------------------------------------------

    async def search(
        self, kb_id: str, query: str, *, limit: int, filters: Mapping[str, JsonValue] | None = None
    ) -> list[_Row]:
        """Best passages first (bm25 / ts_rank_cd; higher score is better)."""
        terms = query_tokens(query)
        if not terms:
            return []
        params: dict[str, object] = {"kb": kb_id, "limit": limit}
        conditions: list[str] = []
        if self.dialect == "postgresql":
            if filters:
                conditions.append("c.metadata @> CAST(:filter AS JSONB)")
                params["filter"] = json.dumps_str(dict(filters))
            params["cfg"] = self._ts_config
            ors: list[str] = []
            for i, term in enumerate(terms):
                params[f"t{i}"] = _segment(term)
                ors.append(f"phraseto_tsquery(CAST(:cfg AS regconfig), :t{i})")
            where = " AND ".join(["c.kb_id = :kb", "c.tsv @@ q.query", *conditions])
            sql = (
                f"SELECT c.document_id, c.text, c.metadata, ts_rank_cd(c.tsv, q.query) AS score "
                f"FROM kb_chunks c, (SELECT {' || '.join(ors)} AS query) q "
                f"WHERE {where} ORDER BY score DESC, c.id LIMIT :limit"
            )
        else:
            for i, (key, value) in enumerate((filters or {}).items()):
                conditions.append(f"json_extract(c.metadata, :p{i}) = :v{i}")
                params[f"p{i}"] = f'$."{key}"'
                params[f"v{i}"] = int(value) if isinstance(value, bool) else value
            params["match"] = _fts5_query(terms)
            where = " AND ".join(["kb_chunks_fts MATCH :match", "c.kb_id = :kb", *conditions])
            sql = (
                "SELECT c.document_id, c.text, c.metadata, -bm25(kb_chunks_fts) AS score "
                "FROM kb_chunks_fts JOIN kb_chunks c ON c.id = kb_chunks_fts.rowid "
                f"WHERE {where} ORDER BY score DESC, c.id LIMIT :limit"
            )
        async with self.engine.connect() as conn:
            rows = (await conn.execute(text(sql), params)).all()
        out: list[_Row] = []
        for document_id, body, metadata, score in rows:
            # SQLite hands back the column's JSON text, PostgreSQL the decoded JSONB object
            meta = json.loads_object(metadata) if isinstance(metadata, str) else cast(JsonObject, metadata)
            out.append(_Row(str(document_id), str(body), dict(meta), float(score)))
        return out


# -- the provider ----------------------------------------------------------------------------------------------


def _check_filters(filters: Mapping[str, JsonValue] | None) -> dict[str, JsonValue]:
    out: dict[str, JsonValue] = {}
    for key, value in (filters or {}).items():
        if not _FILTER_KEY.fullmatch(key):
            raise InvalidArgumentError(f"filter key {key!r} must be [A-Za-z0-9_.-]{{1,64}}")
        if not isinstance(value, str | int | float | bool):
            raise InvalidArgumentError(f"filter {key!r} must be a string, number or boolean (equality only)")
        out[key] = value
    return out


def _iter_files(root: Path) -> list[tuple[str, Path]]:
    """``(document id, path)`` of the ingestible files under *root*, in a stable order."""
    if not root.exists():
        log.warning("knowledge path %s does not exist; skipping it", root)
        return []
    if root.is_file():
        return [(root.name, root)] if root.suffix.lower() in SUPPORTED_SUFFIXES else []
    files: list[tuple[str, Path]] = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.suffix.lower() in SUPPORTED_SUFFIXES:
            files.append((path.relative_to(root).as_posix(), path))
    return files


class EmbeddedKnowledge:
    """A :class:`~agentrunner_host.providers.protocols.KnowledgeProvider` over :class:`KnowledgeIndex`.

    Call :meth:`sync` to (re)ingest the configured files (unchanged files are skipped by digest, deleted ones
    dropped). Reranking, when a knowledge base names a rerank model, goes through *models*.
    """

    def __init__(
        self,
        index: KnowledgeIndex,
        knowledge_bases: Iterable[KnowledgeBaseConfig],
        *,
        models: ModelProvider | None = None,
        model_resources: Iterable[ModelResource] = (),
    ) -> None:
        self.index = index
        """The full-text index."""
        self.knowledge_bases: dict[str, KnowledgeBaseConfig] = {}
        """Configured knowledge bases by id."""
        for kb in knowledge_bases:
            if kb.id in self.knowledge_bases:
                raise ValueError(f"knowledge base id {kb.id!r} is configured twice")
            self.knowledge_bases[kb.id] = kb
        self._models = models
        self._model_resources = {m.model_id: m for m in model_resources}

    def resources(self) -> list[KnowledgeBaseResource]:
        """Catalog entries for :class:`~agentrunner_host.catalog.ResourceCatalog`."""
        return [kb.resource() for kb in self.knowledge_bases.values()]

    async def ingest_text(
        self,
        kb_id: str,
        document_id: str,
        content: str,
        *,
        markdown: bool = True,
        file_name: str | None = None,
    ) -> int:
        """Index one document (replacing an older version); returns its chunk count (0 when unchanged)."""
        kb = self._kb(kb_id)
        digest = hashlib.sha256(content.encode()).hexdigest()
        if await self.index.digest(kb_id, document_id) == digest:
            return 0
        chunks = chunk_document(content, markdown=markdown, max_chars=kb.chunk_chars)
        name = file_name or document_id.rsplit("/", 1)[-1]
        metadata: dict[str, JsonValue] = {"file_name": name, "document_id": document_id}
        await self.index.replace(kb_id, document_id, chunks, digest=digest, metadata=metadata)
        return len(chunks)

    async def sync(self, *, kb_id: str | None = None) -> dict[str, int]:
        """Ingest the configured files of every knowledge base (or one); returns chunks written per kb."""
        written: dict[str, int] = {}
        targets = [self._kb(kb_id)] if kb_id is not None else list(self.knowledge_bases.values())
        for kb in targets:
            seen: set[str] = set()
            total = 0
            for root in kb.paths:
                for document_id, path in await asyncio.to_thread(_iter_files, root):
                    if document_id in seen:
                        log.warning(
                            "knowledge base %s: %s repeats document %s; skipping it", kb.id, path, document_id
                        )
                        continue
                    seen.add(document_id)
                    content = await asyncio.to_thread(path.read_text, encoding="utf-8", errors="replace")
                    markdown = path.suffix.lower() in (".md", ".markdown")
                    total += await self.ingest_text(
                        kb.id, document_id, content, markdown=markdown, file_name=path.name
                    )
            for stale in set(await self.index.documents(kb.id)) - seen:
                await self.index.remove(kb.id, stale)
            written[kb.id] = total
        return written

    def _kb(self, kb_id: str) -> KnowledgeBaseConfig:
        kb = self.knowledge_bases.get(kb_id)
        if kb is None:
            raise NotFoundError(f"knowledge base {kb_id!r} is not configured on this host")
        return kb

    async def retrieve(
        self, kb: KnowledgeBaseResource, params: KnowledgeRetrieveParams, *, access: RunAccess
    ) -> KnowledgeRetrieveResult:
        """Best passages first; reranked when the knowledge base names a rerank model."""
        config = self._kb(kb.kb_id)
        filters = _check_filters(params.filters)
        top_k = min(params.top_k, MAX_TOP_K)
        rerank = self._reranker(config)
        limit = max(top_k, config.rerank_candidates) if rerank is not None else top_k
        rows = await self.index.search(config.id, params.query_text, limit=limit, filters=filters)
        if rerank is not None and len(rows) > 1:
            rows = await self._rerank(rerank, params.query_text, rows, access)
        hits = [
            KnowledgeHit(
                text=r.text, score=r.score, kb_id=config.id, document_id=r.document_id, metadata=r.metadata
            )
            for r in rows[:top_k]
        ]
        return KnowledgeRetrieveResult(hits=hits)

    def _reranker(self, config: KnowledgeBaseConfig) -> ModelResource | None:
        if config.rerank_model_id is None or self._models is None:
            return None
        model = self._model_resources.get(config.rerank_model_id)
        if model is None:
            log.warning(
                "knowledge base %s: rerank model %s is not configured", config.id, config.rerank_model_id
            )
        return model

    async def _rerank(
        self, model: ModelResource, query: str, rows: list[_Row], access: RunAccess
    ) -> list[_Row]:
        assert self._models is not None
        params = ModelRerankParams(model_id=model.model_id, query=query, documents=[r.text for r in rows])
        try:
            ranked = await self._models.rerank(model, params, access=access)
        except Exception as exc:  # full-text order is still a useful answer
            log.warning(
                "rerank with %s failed (%s); keeping full-text order", model.model_id, type(exc).__name__
            )
            return rows
        out = [
            _Row(rows[item.index].document_id, rows[item.index].text, rows[item.index].metadata, item.score)
            for item in ranked.results
            if 0 <= item.index < len(rows)
        ]
        return out or rows
