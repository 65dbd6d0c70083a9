"""The recall relevance rule (docs/recall.md): only matches are returned, ordered by path
class, coarse use and relevance; degenerate queries and pages answer clearly."""

from __future__ import annotations

import math
import tempfile
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from realmem.read import floor, recall, search
from realmem.storage import db
from realmem.write import memories
from realmem.app import Realmem
from realmem.interface.cli import cli
from realmem.fakes.embeddings import fake_embedding
from realmem.write.attached import open_attached
from realmem.projections import index
from realmem.interface.render import list_text, recall_text
from realmem.projections.tokenize import index_tokens, query_units

DIMS = 64
VOCAB = ["deploy", "deploys", "deployment", "database", "migration", "migrations", "redis", "cache", "the",
         "how", "docker", "pytest", "usedCount", "数据库", "迁移", "テスト", "実行", "배포", "금요일", "fridays",
         "src/db", "alembic", "run", "never", "on"]
NOISE = ["flutter", "蓝牙", "arduino", "위젯", "?", "*"]


def _add(app: Realmem, caption: str, content: str) -> str:
    store, stored = memories.place(app, "global", None)
    return memories.add(app, caption, content, store=store, stored_paths=stored, source="add").id


def _index_text(app: Realmem, mem_id: str) -> set[str]:
    m = next(x for x in app.memories() if x.id == mem_id)
    return set(index_tokens(m.caption)) | set(index_tokens(m.content + "\n" + " ".join(m.paths)))


def oracle(app: Realmem, query: str, vectors: dict[str, list[float]]) -> tuple[set[str], set[str]]:
    """The documented rule, computed from the memories' texts without the search code: the
    matches, and the plausible memories (weak matches are drawn from them)."""
    docs = {m.id: _index_text(app, m.id) for m in app.memories()}
    n = max(1, len(docs))

    def df(cover: str) -> int:
        if cover.endswith("*"):  # a stem weighs as its most common indexed form
            forms = {t for toks in docs.values() for t in toks if t.startswith(cover[:-1])}
            return max((sum(1 for toks in docs.values() if f in toks) for f in forms), default=0)
        return sum(1 for toks in docs.values() if cover in toks)

    def has(toks: set[str], cover: str) -> bool:
        return any(t.startswith(cover[:-1]) for t in toks) if cover.endswith("*") else cover in toks

    freq = [(covers, max(df(c) for c in covers)) for _, covers, topical in query_units(query) if topical]
    idf = lambda f: math.log(1 + (n - f + 0.5) / (f + 0.5))  # noqa: E731
    known = [idf(f) for _, f in freq if f]
    absent = (min(known) + idf(0)) / 2 if known else idf(0)  # a word no memory holds
    units = [(covers, idf(f) if f else absent) for covers, f in freq]
    total = sum(w for _, w in units)
    coverage = {i: sum(w for cs, w in units if any(has(toks, c) for c in cs)) / total
                for i, toks in docs.items()} if total else {}
    coverage = {i: c for i, c in coverage.items() if c > 0}
    best = max(coverage.values(), default=0.0)
    hybrid = bool(vectors and total)
    cov_min = recall.COVERAGE_MIN_HYBRID if hybrid else recall.COVERAGE_MIN
    out = {i for i, c in coverage.items() if c >= cov_min and c >= recall.COVERAGE_REL * best}
    # BM25 only, any memory holding a topical word is plausible (the best of them by BM25 shown)
    plausible = {i for i, c in coverage.items() if c >= recall.WEAK_COVERAGE_HYBRID or not hybrid}
    if hybrid:
        q = fake_embedding(query, DIMS)
        cos = {i: sum(a * b for a, b in zip(q, v)) for i, v in vectors.items()}
        limits = floor.floors(app.conn, "", lambda t: fake_embedding(t, DIMS))
        if limits is not None:
            ranked = sorted(cos.values(), reverse=True)
            others = ranked[1:recall.TYPICAL]
            typical = sum(others) / len(others) if others else None
            spread = limits.strong - limits.weak
            out |= {i for i, c in cos.items() if c >= ranked[0] - recall.COSINE_GAP * spread
                    and (c >= limits.strong + recall.CLEAR * spread or (typical is not None and c >= limits.weak
                                                and c - typical >= recall.MARGIN * spread))}
            plausible |= {i for i, c in cos.items() if c >= limits.weak}
    return out, plausible | out


texts = st.lists(st.sampled_from(VOCAB), min_size=1, max_size=6).map(" ".join)
stores = st.lists(st.tuples(texts, texts), min_size=1, max_size=14)
queries = st.lists(st.sampled_from(VOCAB + NOISE), min_size=1, max_size=4).map(" ".join)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(facts=stores, query=queries, with_vectors=st.booleans(), beside=st.booleans())
def test_every_returned_memory_is_a_match_and_every_match_is_returned(facts, query, with_vectors, beside,
                                                                     tmp_path: Path) -> None:
    """``beside``: the lexical search runs on a second connection while the query is embedded;
    without one (``reader`` gives none, as inside a transaction) it runs after.  The answer must
    not change."""
    with tempfile.TemporaryDirectory(dir=tmp_path) as tmp, open_attached(Path(tmp) / "home", Path(tmp)) as app:
        if not beside:
            app.reader = lambda: None  # type: ignore[method-assign]
        made = [_add(app, c, b) for c, b in facts]
        vectors: dict[str, list[float]] = {}
        if with_vectors:
            with db.transaction(app.conn):
                index.set_space(app.conn, "prop-space", DIMS)
                for m in app.memories():
                    vectors[m.id] = fake_embedding(m.caption + "\n\n" + m.content, DIMS)
                    index.cache_put(app.conn, m.hash, "prop-space", vectors[m.id])
        embed = (lambda _a, t: fake_embedding(t, DIMS)) if with_vectors else (lambda _a, t: None)
        res = recall.recall(app, queries=[query], page_size=100, count_hits=False, embed=embed)
        searched = any(topical for _, _, topical in recall.query_units(query))
        assert (app._reader is not None) == bool(beside and with_vectors and searched)
        got = {i.memory.id for i in res.items if not i.weak}
        weak = {i.memory.id for i in res.items if i.weak}
        expected, plausible = oracle(app, query, vectors)
        borderline = set()
        if with_vectors:  # float32 ties at the floor may fall either way
            q = fake_embedding(query, DIMS)
            limits = floor.floors(app.conn, "", lambda t: fake_embedding(t, DIMS))
            cos = {i: sum(a * b for a, b in zip(q, v)) for i, v in vectors.items()}
            ranked = sorted(cos.values(), reverse=True)
            others = ranked[1:recall.TYPICAL]
            spread = limits.strong - limits.weak if limits else 0.0
            typical = sum(others) / len(others) if others else math.nan
            edges = [limits.strong + recall.CLEAR * spread, limits.weak, ranked[0] - recall.COSINE_GAP * spread,
                     typical + recall.MARGIN * spread] if limits else []
            borderline = {i for i, c in cos.items() if any(abs(c - e) < 1e-5 for e in edges)}
        # the matches are exactly the rule's; weak ones are plausible, fill at most WEAK_MAX places
        assert got - borderline == expected - borderline, (query, facts)
        assert weak <= plausible | borderline and len(got) + len(weak) <= max(len(got), recall.WEAK_MAX)
        assert res.weak == (bool(weak) and not got)
        if not with_vectors:  # BM25 only: the places the matches leave are filled while plausible ones remain
            assert len(weak) == min(max(0, recall.WEAK_MAX - len(got)), len(plausible - got)), (query, facts)
        assert set(made) >= got | weak
        # ordering: matches by path class, then coarse use, then relevance; weak ones after, by relevance
        flags = [i.weak for i in res.items]
        assert flags == sorted(flags)
        keys = [(i.path_class, -recall.use_bucket(i.used_count), -i.relevance) for i in res.items if not i.weak]
        assert keys == sorted(keys)
        assert [-i.relevance for i in res.items if i.weak] == sorted(-i.relevance for i in res.items if i.weak)
        if not got and not weak:
            assert recall_text(res).startswith("No memory matches")


def test_unrelated_neighbours_are_not_matches(home: Path, tmp_path: Path) -> None:
    """Vector search always has neighbours; an off-topic query must still get nothing."""
    with open_attached(home, tmp_path) as app:
        for i, (c, b) in enumerate([("Deploy with make deploy", "Never on Fridays."),
                                    ("Migrations use alembic", "alembic upgrade head"),
                                    ("Redis keys expire after 30 minutes", "sess: prefix"),
                                    ("pytest needs Docker for integration tests", "pytest -m integration"),
                                    ("Use pnpm in web/", "npm install creates a lockfile CI rejects"),
                                    ("Logs are structlog key-value pairs", "never f-strings")]):
            _add(app, c, b)
        with db.transaction(app.conn):
            index.set_space(app.conn, "s", DIMS)
            for m in app.memories():
                index.cache_put(app.conn, m.hash, "s", fake_embedding(m.caption + "\n\n" + m.content, DIMS))
        embed = lambda _a, t: fake_embedding(t, DIMS)  # noqa: E731
        assert search.knn(app.conn, fake_embedding("flutter widget rebuild", DIMS), app.visible_stores(), 10)
        res = recall.recall(app, queries=["flutter widget rebuild"], embed=embed)
        assert res.items == [] and recall_text(res) == 'No memory matches "flutter widget rebuild".'
        assert [i.memory.caption for i in recall.recall(app, queries=["alembic migrations"], embed=embed).items][0] \
            == "Migrations use alembic"


def test_the_lexical_search_runs_while_the_query_is_embedded(home: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """It needs no vector, so it runs on the second connection meanwhile: an embedder that
    waits for it to start is not left waiting (run after the embedding, it never would)."""
    with open_attached(home, tmp_path) as app:
        a = _add(app, "Deploy with make deploy", "Never on Fridays.")
        _add(app, "Migrations use alembic", "alembic upgrade head")
        with db.transaction(app.conn):
            index.set_space(app.conn, "s", DIMS)
            for m in app.memories():
                index.cache_put(app.conn, m.hash, "s", fake_embedding(m.caption + "\n\n" + m.content, DIMS))
        started, real = threading.Event(), search.lexical

        def lexical(conn, *args):  # type: ignore[no-untyped-def]
            if conn is not app.conn:
                started.set()
            return real(conn, *args)

        def embed(_app: Realmem, text: str) -> list[float]:
            assert started.wait(60), "the lexical search had not started when the embedding ended"
            return fake_embedding(text, DIMS)

        monkeypatch.setattr(search, "lexical", lexical)
        res = recall.recall(app, queries=["make deploy fridays"], embed=embed, count_hits=False)
        assert [i.memory.id for i in res.items if not i.weak][:1] == [a]


def test_use_is_coarse_so_a_few_hits_cannot_lift_a_weaker_match(home: Path, tmp_path: Path) -> None:
    with open_attached(home, tmp_path) as app:
        strong = _add(app, "postgres vacuum settings", "postgres vacuum runs nightly")
        weak = _add(app, "postgres vacuum notes", "postgres vacuum is mentioned here among many other words of text")
        assert [recall.use_bucket(u) for u in (0, 1, 2, 3, 6, 7, 14, 15)] == [0, 1, 1, 2, 2, 3, 3, 4]
        for _ in range(2):
            memories.reinforce(app, next((m.store, m.id) for m in app.memories() if m.id == weak))
        order = [i.memory.id for i in recall.recall(app, queries=["postgres vacuum"], count_hits=False).items]
        assert order[0] == weak  # 2 uses: bucket 1 over bucket 0 (use still orders)
        memories.reinforce(app, next((m.store, m.id) for m in app.memories() if m.id == strong))
        order = [i.memory.id for i in recall.recall(app, queries=["postgres vacuum"], count_hits=False).items]
        assert order == [strong, weak]  # 1 use against 2: same bucket, relevance decides


# --- degenerate inputs -------------------------------------------------------------------------


@pytest.mark.parametrize("vector", [[0.0] * DIMS, [math.nan] * DIMS, [math.inf] + [0.0] * (DIMS - 1), []])
def test_zero_or_nan_query_vector_falls_back_to_bm25(home: Path, tmp_path: Path, vector: list[float]) -> None:
    with open_attached(home, tmp_path) as app:
        a = _add(app, "Deploy with make deploy", "Never on Fridays.")
        with db.transaction(app.conn):
            index.set_space(app.conn, "s", DIMS)
            for m in app.memories():
                index.cache_put(app.conn, m.hash, "s", fake_embedding(m.caption, DIMS))
        assert search.knn(app.conn, vector, app.visible_stores(), 5) == []
        res = recall.recall(app, queries=["deploy"], embed=lambda _a, _t: vector, count_hits=False)
        assert [i.memory.id for i in res.items] == [a]
        res = recall.recall(app, queries=["*"], embed=lambda _a, _t: vector, count_hits=False)
        assert res.items == [] and "has no words to search for" in recall_text(res)


@pytest.mark.parametrize("query", ["*", "?!", "...", "   ", "", "「」、。", "how do I", "x" * 10_000,
                                   "deploy " * 2000, "数据库" * 3000])
def test_degenerate_queries_answer_clearly(home: Path, tmp_path: Path, query: str) -> None:
    with open_attached(home, tmp_path) as app:
        _add(app, "Deploy with make deploy", "Never on Fridays.")
        res = recall.recall(app, queries=[query], count_hits=False, embed=lambda _a, _t: None)
        text = recall_text(res)
        if not query.strip():
            assert text == "Nothing to recall: give a query, paths or ids."
        elif len(query) > recall.MAX_QUERY:
            assert f"Searched the first {recall.MAX_QUERY} characters" in text
        elif not res.items:
            assert text.startswith("No memory matches") and len(text) < 400


def test_cli_recall_star_with_an_embedder_that_answers_zeros(home: Path, tmp_path: Path, servers) -> None:  # type: ignore[no-untyped-def]
    """`realmem recall '*'` used to crash in search.knn (TypeError on a NULL distance)."""
    _, emb, _ = servers
    emb.dims = DIMS
    emb.script({"*": [0.0] * DIMS})
    with open_attached(home, tmp_path) as app:
        _add(app, "Deploy with make deploy", "Never on Fridays.")
    runner = CliRunner()
    base = ["--home", str(home), "--cwd", str(tmp_path)]
    out = runner.invoke(cli, [*base, "recall", "*"])
    assert out.exit_code == 0, out.output
    assert "No memory matches" in out.output and "Traceback" not in out.output


# --- paging ------------------------------------------------------------------------------------


def test_recall_and_list_pages_say_page_x_of_y_and_never_repeat_page_one(home: Path, tmp_path: Path) -> None:
    with open_attached(home, tmp_path) as app:
        made = [_add(app, f"redis note {i}", f"redis fact number {i}") for i in range(5)]
        r1 = recall.recall(app, queries=["redis"], page_size=2, count_hits=False)
        assert recall_text(r1).startswith("5 memories, page 1 of 3:") and "More: page=2." in recall_text(r1)
        past = recall.recall(app, queries=["redis"], page=4, page_size=2)
        assert past.items == [] and recall_text(past) == "There is no page 4: 5 memories fill 3 pages."
        assert all(app.counters((m.store, m.id))[0] == 0 for m in app.memories())  # no hit for it
        lst = recall.listing(app, page_size=2)
        assert list_text(lst).startswith("5 memories, page 1 of 3")
        gone = recall.listing(app, page=7, page_size=2)
        assert gone.items == [] and list_text(gone) == "There is no page 7: 5 memories fill 3 pages."
        assert len(made) == 5
        runner = CliRunner()
        base = ["--home", str(home), "--cwd", str(tmp_path)]
        out = runner.invoke(cli, [*base, "list", "--page", "9"])
        assert "There is no page 9" in out.output


# --- relevance: cosine in spreads plus coverage -----------------------------------------------


def test_relevance_adds_coverage_to_the_cosine_measured_in_spreads() -> None:
    """A paraphrase (near, no shared word) outranks a memory that only shares the words; a memory
    both near and covering outranks both; the ranking, not RRF of two lists, sets each RRF term."""
    limits = floor.Floors(strong=0.8, weak=0.7)  # spread 0.1
    k = lambda i: recall.Key("s", i)  # noqa: E731
    found = {k(n): recall.Match(k(n)) for n in ("near", "words", "both", "far")}
    near = [(k("near"), 0.85), (k("both"), 0.80), (k("words"), 0.72), (k("x"), 0.71)]
    for key, cos in near[:3]:
        found[key].cosine = cos
    for key, cov in {k("words"): 1.0, k("both"): 0.5, k("far"): 0.2}.items():
        found[key].coverage = cov
    recall._rank(found, near, limits)
    scores = {m.key[1]: round(m.score, 6) for m in found.values()}
    # (cos - weak) / spread + LEXICAL_WEIGHT * coverage; "far" is past the neighbours: the weak
    # floor or the lowest neighbour's cosine, whichever is lower
    assert scores == {"near": 1.5, "both": round(1.0 + recall.LEXICAL_WEIGHT * 0.5, 6),
                      "words": round(0.2 + recall.LEXICAL_WEIGHT, 6), "far": round(recall.LEXICAL_WEIGHT * 0.2, 6)}
    order = sorted(found.values(), key=lambda m: -m.rrf)
    assert [m.key[1] for m in order] == ["near", "both", "words", "far"]
    assert order[0].rrf == 1.0 / (search.RRF_K + 1)


@pytest.mark.parametrize("limits", [None, floor.Floors(math.inf, math.inf)])
def test_without_a_vector_scale_the_lexical_order_stands(limits: floor.Floors | None) -> None:
    k = lambda i: recall.Key("s", i)  # noqa: E731
    found = {k(n): recall.Match(k(n), coverage=c) for n, c in (("first", 0.9), ("second", 0.5))}  # lexical order
    recall._rank(found, [(k("second"), 0.99)], limits)
    assert [m.key[1] for m in sorted(found.values(), key=lambda m: -m.rrf)] == ["first", "second"]
