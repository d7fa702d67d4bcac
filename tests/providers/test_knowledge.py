"""Knowledge bases: chunking, the full-text index on SQLite (FTS5) and PostgreSQL (tsvector + GIN), filters,
safe query tokenising and optional reranking through the fake OpenAI-compatible API."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agentrunner import InvalidArgumentError, KnowledgeBaseResource, NotFoundError
from agentrunner.actions import KnowledgeRetrieveParams
from agentrunner_host.access import ConversationKey, RunAccess
from agentrunner_host.providers.knowledge import (
    KNOWLEDGE_DB_FILE_NAME,
    EmbeddedKnowledge,
    KnowledgeBaseConfig,
    KnowledgeIndex,
    chunk_document,
    query_tokens,
)
from agentrunner_host.providers.llm import ModelConfig, OpenAICompatibleModels
from agentrunner_host.stores.engine import create_engine, default_sqlite_url
from fakes_openai import FakeOpenAIServer
from pg_databases import pg_base_url
from sqlalchemy import text

ACCESS = RunAccess(
    run_id="run-1",
    runner_id="plugin:test/fake/default",
    plugin_id="test/fake",
    binding_id="b-1",
    event_id="evt-1",
    conversation=ConversationKey("conv-1"),
)

GUIDE = """# Installation

Install the host with uv. The installer needs Python 3.11.

## Configuration

Models are configured by id. Every model names the environment variable of its API key.

Knowledge bases ingest Markdown and text files.

```python
# not a heading inside a fence
print("hello")
```

# Troubleshooting

If the host cannot reach the model provider, check the proxy settings.
"""

FAQ = """How do I reset my password?
Open the settings page and choose reset.

Where are the logs?
Logs are written to the data directory.
"""


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def index(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[KnowledgeIndex]:
    """A prepared index on SQLite (its own file) or on a private PostgreSQL schema."""
    if request.param == "sqlite":
        host_engine = create_engine(default_sqlite_url(tmp_path))
        opened = await KnowledgeIndex.open(host_engine, data_dir=tmp_path)
        try:
            yield opened
        finally:
            await opened.aclose()
            await host_engine.dispose()
        return
    url = pg_base_url()
    schema = f"kb_{uuid.uuid4().hex[:16]}"
    admin = create_engine(url)
    try:
        async with admin.begin() as conn:
            await conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        engine = create_engine(url, connect_args={"server_settings": {"search_path": schema}})
        try:
            opened = await KnowledgeIndex.open(engine, data_dir=tmp_path)
            yield opened
        finally:
            await engine.dispose()
            async with admin.begin() as conn:
                await conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    finally:
        await admin.dispose()


def _kb(tmp_path: Path, **kwargs: Any) -> KnowledgeBaseConfig:
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    (docs / "guide.md").write_text(GUIDE, encoding="utf-8")
    (docs / "faq.txt").write_text(FAQ, encoding="utf-8")
    (docs / "image.png").write_bytes(b"\x89PNG")
    return KnowledgeBaseConfig(id="kb-docs", name="Docs", description="Product docs", paths=[docs], **kwargs)


def _resource(kb_id: str = "kb-docs") -> KnowledgeBaseResource:
    return KnowledgeBaseResource(kb_id=kb_id, operations=["retrieve"])


async def _retrieve(knowledge: EmbeddedKnowledge, query: str, **kwargs: Any) -> list[tuple[str | None, str]]:
    params = KnowledgeRetrieveParams(kb_id="kb-docs", query_text=query, **kwargs)
    result = await knowledge.retrieve(_resource(), params, access=ACCESS)
    return [(h.document_id, h.text) for h in result.hits]


# -- chunking --------------------------------------------------------------------------------------------------


def test_markdown_is_chunked_by_heading_with_the_heading_path_kept() -> None:
    """Each heading starts a new chunk; fenced ``#`` lines are not headings; the path is kept."""
    chunks = chunk_document(GUIDE, markdown=True, max_chars=1200)
    assert [(c.heading, c.section) for c in chunks] == [
        ("Installation", "Installation"),
        ("Configuration", "Installation > Configuration"),
        ("Troubleshooting", "Troubleshooting"),
    ]
    assert "# not a heading inside a fence" in chunks[1].text
    assert chunks[0].text == "Install the host with uv. The installer needs Python 3.11."


def test_paragraphs_are_packed_up_to_the_cap_and_long_ones_are_cut_at_boundaries() -> None:
    """No chunk exceeds the cap; an over-long paragraph is cut between sentences or words."""
    sentence = "This sentence is about the knowledge index. "
    content = "\n\n".join([sentence * 3, sentence * 40, "short tail"])
    chunks = chunk_document(content, markdown=False, max_chars=300)
    assert all(len(c.text) <= 300 for c in chunks)
    assert len(chunks) >= 6
    assert all(c.text.endswith((".", "tail")) for c in chunks)
    assert all(c.heading is None for c in chunks)
    assert "".join(c.text.replace("\n\n", " ").replace(" ", "") for c in chunks) == content.replace(
        "\n\n", ""
    ).replace(" ", "")


def test_query_tokens_are_words_and_cjk_bigrams_without_syntax() -> None:
    """Operators, quotes and column filters are reduced to plain terms; CJK runs become bigrams."""
    assert query_tokens('body:"drop" OR NEAR(a b) *') == ["body", "drop", "or", "near", "a", "b"]
    assert query_tokens("知识库检索") == ["知 识", "识 库", "库 检", "检 索"]
    assert query_tokens("中 uv") == ["中", "uv"]
    assert query_tokens('"" -- ;') == []


# -- the index --------------------------------------------------------------------------------------------------


async def test_files_are_ingested_and_retrieved_by_relevance_with_metadata(
    index: KnowledgeIndex, tmp_path: Path
) -> None:
    """Markdown and text files are indexed; the best passage comes first with file name and heading."""
    knowledge = EmbeddedKnowledge(index, [_kb(tmp_path)])
    written = await knowledge.sync()
    assert written["kb-docs"] == 4  # three sections of the guide, the FAQ packed into one chunk
    result = await knowledge.retrieve(
        _resource(),
        KnowledgeRetrieveParams(kb_id="kb-docs", query_text="proxy settings provider"),
        access=ACCESS,
    )
    best = result.hits[0]
    assert best.document_id == "guide.md" and best.text.startswith("If the host cannot reach")
    assert best.metadata["file_name"] == "guide.md"
    assert best.metadata["heading"] == "Troubleshooting"
    assert best.score > 0
    assert [h.score for h in result.hits] == sorted((h.score for h in result.hits), reverse=True)


async def test_headings_are_searchable_and_unrelated_queries_find_nothing(
    index: KnowledgeIndex, tmp_path: Path
) -> None:
    """A query matching only a heading finds its section; a query with no known word returns no hits."""
    knowledge = EmbeddedKnowledge(index, [_kb(tmp_path)])
    await knowledge.sync()
    hits = await _retrieve(knowledge, "troubleshooting")
    assert hits and hits[0][1].startswith("If the host")
    assert await _retrieve(knowledge, "zebra quantum") == []


async def test_top_k_limits_the_passages(index: KnowledgeIndex, tmp_path: Path) -> None:
    """At most ``top_k`` passages are returned."""
    knowledge = EmbeddedKnowledge(index, [_kb(tmp_path)])
    await knowledge.sync()
    assert len(await _retrieve(knowledge, "the host model logs password", top_k=2)) == 2
    assert len(await _retrieve(knowledge, "the host model logs password", top_k=50)) == 4


async def test_metadata_filters_are_equality_only(index: KnowledgeIndex, tmp_path: Path) -> None:
    """Filters restrict hits by metadata equality; odd keys or non-scalar values are invalid_argument."""
    knowledge = EmbeddedKnowledge(index, [_kb(tmp_path)])
    await knowledge.sync()
    hits = await _retrieve(knowledge, "the host logs", filters={"file_name": "faq.txt"})
    assert hits and {doc for doc, _ in hits} == {"faq.txt"}
    assert await _retrieve(knowledge, "the host logs", filters={"heading": "Configuration", "chunk": 1}) == [
        ("guide.md", hits_text(GUIDE))
    ]
    with pytest.raises(InvalidArgumentError, match=r"must be \[A-Za-z0-9_\.-\]\{1,64\}"):
        await _retrieve(knowledge, "host", filters={"$.x') OR 1=1 --": "a"})
    with pytest.raises(
        InvalidArgumentError,
        match=r"filter 'file_name' must be a string, number or boolean \(equality only\)",
    ):
        await _retrieve(knowledge, "host", filters={"file_name": ["a", "b"]})


def hits_text(guide: str) -> str:
    """The Configuration section's chunk text of :data:`GUIDE`."""
    return chunk_document(guide, markdown=True)[1].text


async def test_hostile_queries_are_searched_as_plain_words(index: KnowledgeIndex, tmp_path: Path) -> None:
    """FTS operators and quotes in a query never raise and never change what is matched."""
    knowledge = EmbeddedKnowledge(index, [_kb(tmp_path)])
    await knowledge.sync()
    for hostile in [
        '"unbalanced',
        "logs AND NOT",
        "kb_chunks_fts:*",
        "NEAR(logs",
        "'); DROP TABLE kb_chunks; --",
        "^logs",
    ]:
        hits = await _retrieve(knowledge, hostile)
        assert all(isinstance(doc, str) for doc, _ in hits)
    assert await _retrieve(knowledge, '"logs" AND NOT') == await _retrieve(knowledge, "logs and not")
    assert (await _retrieve(knowledge, "logs"))[0][0] == "faq.txt"


async def test_cjk_text_is_found_by_bigrams(index: KnowledgeIndex, tmp_path: Path) -> None:
    """Chinese passages are found by words inside them, not only by the whole run."""
    config = KnowledgeBaseConfig(id="kb-docs", paths=[])
    knowledge = EmbeddedKnowledge(index, [config])
    await knowledge.ingest_text(
        "kb-docs", "zh.md", "# 知识库\n\n主机把文件切分后建立全文索引。\n\n# 模型\n\n另一段讲模型配置。"
    )
    hits = await _retrieve(knowledge, "全文索引")
    assert hits == [("zh.md", "主机把文件切分后建立全文索引。")]


async def test_sync_skips_unchanged_files_and_drops_deleted_ones(
    index: KnowledgeIndex, tmp_path: Path
) -> None:
    """A second sync writes nothing; an edited file is re-indexed; a deleted file disappears."""
    config = _kb(tmp_path)
    knowledge = EmbeddedKnowledge(index, [config])
    await knowledge.sync()
    assert await knowledge.sync() == {"kb-docs": 0}
    (tmp_path / "docs" / "faq.txt").write_text("Completely new answer about unicorns.", encoding="utf-8")
    (tmp_path / "docs" / "guide.md").unlink()
    assert await knowledge.sync() == {"kb-docs": 1}
    assert await index.documents("kb-docs") == ["faq.txt"]
    assert await _retrieve(knowledge, "proxy") == []
    assert (await _retrieve(knowledge, "unicorns"))[0][0] == "faq.txt"


async def test_knowledge_bases_do_not_see_each_others_passages(index: KnowledgeIndex) -> None:
    """A retrieval only returns passages of the knowledge base asked for."""
    knowledge = EmbeddedKnowledge(
        index, [KnowledgeBaseConfig(id="kb-docs"), KnowledgeBaseConfig(id="kb-other")]
    )
    await knowledge.ingest_text("kb-other", "secret.md", "The launch code is banana.")
    await knowledge.ingest_text("kb-docs", "public.md", "Bananas are yellow fruit.")
    assert [doc for doc, _ in await _retrieve(knowledge, "banana launch code")] == []
    with pytest.raises(NotFoundError, match="knowledge base 'kb-missing' is not configured on this host"):
        await knowledge.retrieve(
            _resource("kb-missing"),
            KnowledgeRetrieveParams(kb_id="kb-missing", query_text="x"),
            access=ACCESS,
        )


async def test_prepare_is_idempotent(index: KnowledgeIndex) -> None:
    """Preparing the index again keeps what it holds."""
    knowledge = EmbeddedKnowledge(index, [KnowledgeBaseConfig(id="kb-docs")])
    await knowledge.ingest_text("kb-docs", "a.md", "alpha beta")
    await index.prepare()
    await index.prepare()
    assert await _retrieve(knowledge, "alpha") == [("a.md", "alpha beta")]


async def test_the_sqlite_index_lives_in_its_own_file(tmp_path: Path) -> None:
    """On a SQLite host the index is a separate file under the data directory, not the host database."""
    host_engine = create_engine(default_sqlite_url(tmp_path))
    opened = await KnowledgeIndex.open(host_engine, data_dir=tmp_path)
    try:
        assert opened.engine is not host_engine
        assert (tmp_path / KNOWLEDGE_DB_FILE_NAME).exists()
    finally:
        await opened.aclose()
        await host_engine.dispose()


async def test_a_rerank_model_reorders_the_candidates(index: KnowledgeIndex, tmp_path: Path) -> None:
    """With a rerank model the full-text candidates are reordered by its scores (sent top_n = all)."""
    async with FakeOpenAIServer() as server:
        models = OpenAICompatibleModels(
            [ModelConfig(id="rr", base_url=server.base_url, model="rerank-fake", model_type="rerank")]
        )
        try:
            knowledge = EmbeddedKnowledge(
                index,
                [_kb(tmp_path, rerank_model_id="rr")],
                models=models,
                model_resources=models.resources(),
            )
            await knowledge.sync()
            plain = await _retrieve(knowledge, "host model")
            server.queue_rerank([(len(plain) - 1, 0.99), (0, 0.5)])
            reranked = await knowledge.retrieve(
                _resource(),
                KnowledgeRetrieveParams(kb_id="kb-docs", query_text="host model", top_k=2),
                access=ACCESS,
            )
            server.queue_rerank(status=500)
            fallback = await _retrieve(knowledge, "host model")
        finally:
            await models.aclose()
    assert [(h.document_id, h.text) for h in reranked.hits] == [plain[-1], plain[0]]
    assert [h.score for h in reranked.hits] == [0.99, 0.5]
    assert server.requests[0].body["documents"] == [t for _, t in plain]
    assert fallback == plain  # a failing reranker keeps the full-text order


async def test_a_missing_path_is_skipped_not_fatal(index: KnowledgeIndex, tmp_path: Path) -> None:
    """A configured path that does not exist is logged and skipped; the other paths are still ingested."""
    config = _kb(tmp_path)
    config = config.model_copy(update={"paths": [tmp_path / "missing", *config.paths]})
    knowledge = EmbeddedKnowledge(index, [config])
    assert await knowledge.sync() == {"kb-docs": 4}


async def test_a_document_id_seen_twice_is_ingested_once(
    index: KnowledgeIndex, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Two configured paths yielding the same document id do not overwrite each other: the first wins."""
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    (first / "same.md").write_text("apples are red", encoding="utf-8")
    (second / "same.md").write_text("bananas are yellow", encoding="utf-8")
    knowledge = EmbeddedKnowledge(index, [KnowledgeBaseConfig(id="kb-docs", paths=[first, second])])
    assert await knowledge.sync() == {"kb-docs": 1}
    assert await _retrieve(knowledge, "apples") == [("same.md", "apples are red")]
    assert await _retrieve(knowledge, "bananas") == []
    assert "repeats document same.md" in caplog.text
