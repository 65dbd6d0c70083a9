"""The pre-tokenizer against a real FTS5 table declared the way realmem declares it."""

from __future__ import annotations

import string
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from realmem.projections.tokenize import fts_match, index_text, index_tokens, query_tokens

TOKENIZE = "unicode61 remove_diacritics 2 separators ' '"

CJK_FACTS = {
    1: "用 pnpm test:e2e 运行端到端测试",
    2: "データベースのマイグレーションは db/migrate で実行する",
    3: "배포는 금요일에 하지 않는다",
    4: "The usedCount column in packages/web/src/db.ts counts recalls",
    5: "Count how many times each used item appears",
}


def new_fts() -> apsw.Connection:
    conn = apsw.Connection(":memory:")
    conn.execute(f'create virtual table f using fts5(tokens, tokenize="{TOKENIZE}")')
    return conn


def add(conn: apsw.Connection, rowid: int, text: str) -> None:
    conn.execute("insert into f(rowid, tokens) values (?, ?)", (rowid, index_text(text)))


def search(conn: apsw.Connection, query: str) -> list[int]:
    """Row ids matching ``query``, best bm25 first."""
    expr = fts_match(query)
    if expr is None:
        return []
    sql = "select rowid from f where f match ? order by bm25(f), rowid"
    return [rowid for (rowid,) in conn.execute(sql, (expr,))]


@pytest.fixture(scope="module")
def facts() -> apsw.Connection:
    conn = new_fts()
    for rowid, text in CJK_FACTS.items():
        add(conn, rowid, text)
    return conn


_U61 = apsw.Connection(":memory:").fts5_tokenizer(
    "unicode61", ["remove_diacritics", "2", "separators", " "]
)


def unicode61(text: str) -> list[str]:
    """What FTS5 itself makes of ``text`` with realmem's tokenizer settings."""
    return [tok for _, _, tok in _U61(text.encode(), apsw.FTS5_TOKENIZE_DOCUMENT, None)]


# --- identifiers, paths, punctuation -------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("usedCount", ["usedcount", "used", "count"]),
        ("HTTPServer", ["httpserver", "http", "server"]),
        ("HTTP2Server", ["http2server", "http", "2", "server"]),
        ("IOError", ["ioerror", "io", "error"]),
        ("snake_case_name", ["snake", "case", "name"]),
        ("kebab-case", ["kebab", "case"]),
        ("os.path.join", ["os", "path", "join"]),
        ("test:e2e", ["test", "e2e", "e", "2", "e"]),
        ("sha256sum", ["sha256sum", "sha", "256", "sum"]),
        ("v1.2.3", ["v1", "v", "1", "2", "3"]),
        ("lowercase", ["lowercase"]),
        ("ÜberCount", ["ubercount", "uber", "count"]),
    ],
)
def test_identifier_splitting(text: str, expected: list[str]) -> None:
    assert index_tokens(text) == expected


def test_paths_split_into_segments() -> None:
    assert index_tokens("packages/web/src/db.ts") == ["packages", "web", "src", "db", "ts"]
    assert index_tokens(r"C:\Users\dev\.config\pi") == ["c", "users", "dev", "config", "pi"]


def test_emoji_and_punctuation_are_dropped() -> None:
    assert index_tokens("🚀 deploy!!! — done? 👍🏽") == ["deploy", "done"]
    assert index_tokens("😀usedCount😀") == ["usedcount", "used", "count"]
    assert index_tokens("...---///***") == []


def test_other_numbers_are_kept() -> None:
    # Tamil ten and Bengali currency numerator are numbers (No) that ICU gives no word
    # status; they are still unicode61 token characters, so they must stay searchable.
    assert index_tokens("௰ ৴") == ["௰", "৴"]


def test_supplementary_characters_do_not_shift_boundaries() -> None:
    # ICU reports UTF-16 offsets; astral characters must not misalign later words.
    assert index_tokens("😀😀 usedCount 𠀋x") == ["usedcount", "used", "count", "𠀋", "x"]


def test_empty_and_blank() -> None:
    assert index_tokens("") == []
    assert query_tokens("   \n\t") == []
    assert index_text("") == ""
    assert fts_match("") is None
    assert fts_match("!!! 😀 ---") is None


def test_normalisation_full_width_case_and_diacritics() -> None:
    assert index_tokens("ＵｓｅｄＣｏｕｎｔ ＤＢ") == index_tokens("usedCount DB")
    assert index_tokens("Café NAÏVE Việt İstanbul") == ["cafe", "naive", "viet", "istanbul"]
    # Kana voicing marks carry meaning: が (ga) must not fold to か (ka).
    assert index_tokens("が") == ["が"]
    # Half-width katakana is NFKC-normalised to full width.
    assert index_tokens("ﾃﾞｰﾀ") == index_tokens("データ")


def test_query_tokens_dedupe_in_order() -> None:
    assert query_tokens("db db.ts DB") == ["db", "ts"]
    assert query_tokens("usedCount used") == ["usedcount", "used", "count"]


def test_fts_match_quotes_tokens() -> None:
    assert fts_match("usedCount") == '"usedcount" OR "used" OR "count"'
    assert fts_match('say "NEAR" AND (x)') == '"say" OR "near" OR "and" OR "x"'


def test_index_text_joins_with_single_spaces() -> None:
    assert index_text("usedCount  in\tdb.ts") == "usedcount used count in db ts"


# --- CJK ------------------------------------------------------------------------------


def test_cjk_index_has_unigrams_and_bigrams() -> None:
    assert index_tokens("端到端") == ["端", "到", "端", "端到", "到端"]


def test_cjk_query_uses_bigrams_or_a_lone_unigram() -> None:
    assert query_tokens("端到端") == ["端到", "到端"]
    assert query_tokens("用 pnpm") == ["用", "pnpm"]
    assert query_tokens("データ") == ["デー", "ータ"]


def test_korean_words_get_bigrams() -> None:
    assert query_tokens("배포는 금요일에") == ["배포", "포는", "금요", "요일", "일에"]


@pytest.mark.parametrize(
    ("query", "fact"),
    [
        ("端到端", 1),
        ("测试", 1),
        ("运行测试", 1),
        ("端到端测试怎么运行", 1),
        ("pnpm test:e2e", 1),
        ("マイグレーション", 2),
        ("データベース", 2),
        ("マイグレーションを実行", 2),
        ("db/migrate", 2),
        ("배포", 3),
        ("배포를 금요일에", 3),  # different particle than the fact (는 -> 를)
        ("금요일", 3),
        ("usedCount", 4),
        ("db.ts", 4),
    ],
)
def test_cjk_and_code_queries_find_their_fact(
    facts: apsw.Connection, query: str, fact: int
) -> None:
    assert search(facts, query)[0] == fact


def test_query_matches_regardless_of_segmentation(facts: apsw.Connection) -> None:
    # ICU segments the fact as 运行|端|到|端|测试, so neither 端到端 nor 行端 is one of its
    # words; the bigrams still match.
    assert search(facts, "行端") == [1]
    assert search(facts, "端到端") == [1]


@pytest.mark.parametrize("query", ["天气很好", "今日は晴れです", "주말에 등산", "会议室"])
def test_unrelated_cjk_query_does_not_match(facts: apsw.Connection, query: str) -> None:
    assert search(facts, query) == []


def test_bm25_prefers_the_exact_identifier(facts: apsw.Connection) -> None:
    # Both facts 4 and 5 contain "used" and "count"; only 4 has the joined identifier.
    assert search(facts, "usedCount") == [4, 5]
    assert search(facts, "usedcount") == [4]


def test_full_width_query_finds_ascii_fact(facts: apsw.Connection) -> None:
    assert search(facts, "ｐｎｐｍ")[0] == 1


# --- unicode61 agreement ----------------------------------------------------------------


def _all_characters() -> Iterator[str]:
    for cp in range(sys.maxunicode + 1):
        if not 0xD800 <= cp <= 0xDFFF:
            yield chr(cp)


@pytest.mark.parametrize("joiner", ["", " "])
def test_every_codepoint_gives_tokens_unicode61_keeps_whole(joiner: str) -> None:
    """FTS5 must store exactly our tokens: none split further or folded differently."""
    text = joiner.join(_all_characters())
    tokens = index_tokens(text)
    assert tokens
    assert unicode61(" ".join(tokens)) == tokens


def test_tokenizing_is_thread_safe() -> None:
    texts = [f"worker{i}Task 任务{i} データ{i} packages/p{i}/index.ts" for i in range(64)]
    expected = [index_tokens(t) for t in texts]
    with ThreadPoolExecutor(max_workers=8) as pool:
        assert list(pool.map(index_tokens, texts * 4)) == expected * 4


# --- properties -------------------------------------------------------------------------

FTS_SYNTAX = st.sampled_from(
    ['"', "'", "*", "^", "(", ")", ":", "-", "+", "AND", "OR", "NOT", "NEAR", "NEAR(", "{", "}"]
)
ANY_TEXT = st.one_of(
    st.text(),
    st.lists(st.one_of(st.text(max_size=8), FTS_SYNTAX), max_size=20).map(" ".join),
    st.lists(st.one_of(st.text(max_size=8), FTS_SYNTAX), max_size=20).map("".join),
)
CJK_TEXT = st.text(
    alphabet=st.sampled_from("用运行端到测试データベースのマイグレーション배포는금요일에하지않는다"),
    min_size=1,
    max_size=12,
)
ASCII_WORD = st.text(
    alphabet=string.ascii_letters + string.digits + "_-./:", min_size=1, max_size=30
)


def _check_tokens(tokens: list[str]) -> None:
    for token in tokens:
        assert token
        assert token == token.lower()
        assert not any(c.isspace() for c in token)
        assert unicode61(token) == [token]


@given(ANY_TEXT)
@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
def test_tokens_are_single_lowercase_unicode61_tokens(text: str) -> None:
    _check_tokens(index_tokens(text))
    queried = query_tokens(text)
    _check_tokens(queried)
    assert len(queried) == len(set(queried))
    assert index_text(text) == " ".join(index_tokens(text))


@given(ANY_TEXT)
@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
def test_fts_match_is_always_valid_fts5(text: str) -> None:
    conn = new_fts()
    add(conn, 1, "plain usedCount 端到端测试 배포는")
    add(conn, 2, text)
    expr = fts_match(text)
    if expr is None:
        assert query_tokens(text) == []
        return
    rows = [r for (r,) in conn.execute("select rowid from f where f match ?", (expr,))]
    assert 2 in rows  # a text always matches its own query


@given(ASCII_WORD, st.sampled_from([" ", "\n", ", ", " (", "`"]))
def test_ascii_word_round_trip(word: str, sep: str) -> None:
    text = f"before{sep}{word}{sep}after"
    assert set(query_tokens(word)) <= set(index_tokens(text))


@given(CJK_TEXT)
def test_cjk_round_trip(word: str) -> None:
    text = f"note: {word} (ok)"
    assert set(query_tokens(word)) <= set(index_tokens(text))
    conn = new_fts()
    add(conn, 7, text)
    add(conn, 8, "unrelated english text")
    assert search(conn, word) == [7]

