"""The embeddings cache survives one bad reply (issue 10, item 8).

The fake embeddings server answers over real HTTP on 127.0.0.1; ``odd_next`` makes its next
reply carry vectors of the wrong length, as an endpoint mid-deploy does.  A change of
embedding space clears the cache only once two replies agree on it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from realmem.read import embedder
from realmem.write import memories
from realmem.app import Realmem
from realmem.fakes import FakeEmbeddings
from realmem.write.attached import open_attached
from realmem.projections import index
from realmem.read.recall import recall


@pytest.fixture
def emb(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeEmbeddings]:
    with FakeEmbeddings(dims=64) as server:
        monkeypatch.setenv("REALMEM_EMBEDDING_URL", server.url)
        monkeypatch.setenv("REALMEM_WORKER_AUTOSTART", "0")
        embedder._clients.clear()  # a fresh client per test, as in a new process
        yield server
    embedder._clients.clear()


def cached(app: Realmem) -> int:
    return app.conn.execute("SELECT count(*) FROM embeddings").fetchone()[0]


def new_process() -> None:
    """A new process starts with a client that has not learned the dimensions yet."""
    embedder._clients.clear()


@pytest.fixture
def app(home: Path, repo: Path, emb: FakeEmbeddings) -> Iterator[Realmem]:
    with open_attached(home, repo) as a:
        for caption, content in [("Deploys go through staging", "kubectl config use-context staging"),
                                 ("Redis listens on 6380", "not the default port"),
                                 ("Tests need docker running", "pnpm test:e2e starts containers")]:
            store, stored = memories.place(a, "shared", None)
            memories.add(a, caption, content, store=store, stored_paths=stored, source="add")
        assert embedder.embed_missing(a) == 3
        yield a


def test_one_odd_reply_in_a_new_process_keeps_the_cache(app: Realmem, emb: FakeEmbeddings) -> None:
    space = index.active_fingerprint(app.conn)
    new_process()
    emb.odd_next(16)  # the dimension probe of the new process gets the odd reply
    vec = embedder.embed_query(app, "staging deploys")
    assert vec is not None and len(vec) == 64  # the second reply showed the first was the odd one
    assert index.active_fingerprint(app.conn) == space and cached(app) == 3
    assert embedder.missing(app) == []


def test_one_odd_reply_to_a_query_is_an_endpoint_error_and_falls_back_to_bm25(app: Realmem,
                                                                              emb: FakeEmbeddings) -> None:
    space = index.active_fingerprint(app.conn)
    emb.odd_next(16)
    assert embedder.embed_query(app, "redis port") is None  # BM25 only for this query
    res = recall(app, queries=["redis port"], count_hits=False)
    assert [i.memory.caption for i in res.items][:1] == ["Redis listens on 6380"]
    assert index.active_fingerprint(app.conn) == space and cached(app) == 3
    # the next normal reply changes nothing either (on main it wiped the cache a second time)
    assert len(embedder.embed_query(app, "redis port") or []) == 64
    assert index.active_fingerprint(app.conn) == space and cached(app) == 3


def test_replies_that_disagree_twice_keep_the_cache(app: Realmem, emb: FakeEmbeddings) -> None:
    space = index.active_fingerprint(app.conn)
    new_process()
    emb.odd_next(16)
    emb.odd_next(24)
    assert embedder.embed_query(app, "docker tests") is None
    assert index.active_fingerprint(app.conn) == space and cached(app) == 3
    assert len(embedder.embed_query(app, "docker tests") or []) == 64


def test_a_real_change_of_space_is_confirmed_then_clears_the_cache(app: Realmem, emb: FakeEmbeddings) -> None:
    space = index.active_fingerprint(app.conn)
    emb.configure(dims=32)  # the model behind the endpoint really changed
    assert embedder.embed_query(app, "staging") is None  # a running process: first an error, BM25
    assert cached(app) == 3
    vec = embedder.embed_query(app, "staging")  # then two consistent replies confirm the new space
    assert vec is not None and len(vec) == 32
    assert index.active_fingerprint(app.conn) != space and index.vec_dims(app.conn) == 32
    assert cached(app) == 0
    assert embedder.embed_missing(app) == 3
    assert recall(app, queries=["staging"], count_hits=False).items[0].memory.caption == "Deploys go through staging"
