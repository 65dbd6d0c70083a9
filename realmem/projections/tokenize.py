"""CJK-aware pre-tokenizer for the FTS5 index (spec: "CJK").

FTS5's unicode61 tokenizer treats a run of CJK characters as one token and knows nothing
about identifiers, so realmem tokenizes in Python and stores the tokens joined by single
spaces in a table declared ``tokenize = "unicode61 remove_diacritics 2 separators ' '"``.
Every token emitted here is therefore a single unicode61 token: lowercase, made only of
characters unicode61 treats as token characters, never containing a separator.

- Non-CJK text is segmented with ICU word boundaries (this is what splits Thai, Lao,
  Khmer and Burmese, which have no spaces), then into alphanumeric runs, then into
  identifier parts (``usedCount`` -> ``usedcount``, ``used``, ``count``).
- Runs of Han, Hiragana, Katakana and Hangul become overlapping character bigrams, plus
  unigrams in the index, so a query matches whether or not both sides would have been
  segmented identically (and Korean particles attached to nouns do not block a match).
"""

from __future__ import annotations

import functools
import re
import threading
import unicodedata
from collections.abc import Iterator
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import icu

# Characters that are letters or numbers to Python (Unicode 14) but separators to the
# unicode61 tokenizer bundled with SQLite (its tables still class them as marks).
_U61_SEPARATOR_LETTERS = "\u19b0-\u19c0\u19c8\u19c9\u1cf2\u1cf3"


# The patterns below are compiled on first use, not at import: compiling them is a cost
# that every start-up loading this module (`realmem status`) would pay for nothing.
@functools.cache
def _word() -> re.Pattern[str]:
    # One unicode61 token character: a letter or number, minus the exceptions above.
    return re.compile(rf"[^\W_{_U61_SEPARATOR_LETTERS}]+")


# Assigned letters and numbers of the Han, Hiragana, Katakana and Hangul blocks (Unicode
# 14); kept to letters and numbers so a bigram is always a single unicode61 token.
_CJK_RANGES = (
    "\u1100-\u11ff"  # Hangul Jamo
    "\u3005-\u3007"  # iteration mark, closing mark, ideographic zero
    "\u3021-\u3029\u3031-\u3035\u3038-\u303c"  # Hangzhou numerals, kana repeat marks
    "\u3041-\u3096\u309d-\u309f"  # Hiragana
    "\u30a1-\u30fa\u30fc-\u30ff"  # Katakana (without the middle dot)
    "\u3131-\u318e"  # Hangul compatibility Jamo
    "\u31f0-\u31ff"  # Katakana phonetic extensions
    "\u3400-\u4dbf\u4e00-\u9fff"  # CJK unified ideographs, extension A
    "\ua960-\ua97c\uac00-\ud7a3\ud7b0-\ud7c6\ud7cb-\ud7fb"  # Hangul
    "\uf900-\ufa6d\ufa70-\ufad9"  # CJK compatibility ideographs
    "\U0001b000-\U0001b122\U0001b150-\U0001b152\U0001b164-\U0001b167"  # kana supplement
    "\U00020000-\U0002a6df\U0002a700-\U0002b738\U0002b740-\U0002b81d"
    "\U0002b820-\U0002cea1\U0002ceb0-\U0002ebe0\U0002f800-\U0002fa1d"
    "\U00030000-\U0003134a"  # CJK extensions B-G and compatibility supplement
)


@functools.cache
def _chunk() -> re.Pattern[str]:
    # Either a CJK run (group 1) or a run of anything else (group 2).
    return re.compile(rf"([{_CJK_RANGES}]+)|([^{_CJK_RANGES}]+)")


# Kana voicing marks are combining marks too, but dropping them would turn が into か.
_KEPT_MARKS = frozenset("\u3099\u309a")

_local = threading.local()
_icu: ModuleType | None = None


def _icu_module() -> ModuleType:
    """PyICU, imported on first use: most commands (status, list, the rpc child's start)
    never tokenize non-ASCII text, and the import is a large share of their start-up."""
    global _icu
    if _icu is None:
        import icu

        _icu = icu
    return _icu


def _word_breaker() -> icu.BreakIterator:
    """One ICU word BreakIterator per thread: creating one costs far more than using it."""
    breaker = getattr(_local, "breaker", None)
    if breaker is None:
        icu = _icu_module()
        breaker = icu.BreakIterator.createWordInstance(icu.Locale.getRoot())
        _local.breaker = breaker
    return breaker


def _normalise(text: str) -> str:
    """NFKC (full-width ASCII -> ASCII), then drop combining marks.

    Dropping marks is what ``remove_diacritics 2`` does for Latin accents; for other
    scripts unicode61 would split a word at any mark it does not know, so a mark can never
    sit inside a token and dropping it keeps the word whole on both index and query side.
    """
    text = unicodedata.normalize("NFKC", text)
    if text.isascii():
        return text
    decomposed = unicodedata.normalize("NFD", text)
    kept = "".join(
        c for c in decomposed if c in _KEPT_MARKS or unicodedata.category(c)[0] != "M"
    )
    return unicodedata.normalize("NFC", kept)


def _word_segments(chunk: str) -> Iterator[str]:
    """ICU word segments of a non-CJK chunk, spaces and punctuation included (ICU's rule
    status would also drop some numbers). Boundaries are UTF-16 offsets, hence the
    UnicodeString slicing."""
    breaker = _word_breaker()
    ustr = _icu_module().UnicodeString(chunk)
    breaker.setText(ustr)
    start = breaker.first()
    for end in breaker:
        yield str(ustr[start:end])
        start = end


def _identifier_parts(run: str) -> list[str]:
    """Split an alphanumeric run at camelCase, acronym and letter/digit boundaries.

    ``usedCount`` -> used, Count; ``HTTPServer`` -> HTTP, Server; ``HTTP2Server`` ->
    HTTP, 2, Server; ``e2e`` -> e, 2, e. Caseless scripts only split at digits.
    """
    if (run.isalpha() and run.islower()) or run.isnumeric():
        return [run]  # no case or digit boundary inside: the common word, checked in C
    parts: list[str] = []
    start = 0
    for i in range(1, len(run)):
        prev, cur = run[i - 1], run[i]
        if prev.isnumeric() != cur.isnumeric():
            split = True
        elif cur.isupper():
            # lower -> Upper starts a word; in an acronym, the last capital starts the
            # next word when a lowercase letter follows (HTTPServer -> HTTP, Server).
            split = not prev.isupper() or (i + 1 < len(run) and run[i + 1].islower())
        else:
            split = False
        if split:
            parts.append(run[start:i])
            start = i
    parts.append(run[start:])
    return parts


def _lower(word: str) -> str:
    """Lowercase the way unicode61 folds, so the index vocabulary is exactly our tokens:
    unicode61 also folds final sigma to sigma."""
    lowered = word.lower()
    return lowered if lowered.isascii() else lowered.replace("\u03c2", "\u03c3")


def _word_tokens(segment: str) -> Iterator[str]:
    """Tokens of one ICU word: each alphanumeric run lowercased, then its parts if any."""
    for run in _word().findall(segment):
        yield _lower(run)
        parts = _identifier_parts(run)
        if len(parts) > 1:
            for part in parts:
                yield _lower(part)


def _cjk_tokens(run: str, *, unigrams: bool) -> Iterator[str]:
    """Overlapping bigrams of a CJK run; unigrams too when asked, or when the run is one
    character (a bigram-free run would otherwise be unsearchable)."""
    if unigrams or len(run) == 1:
        yield from run
    for i in range(len(run) - 1):
        yield run[i : i + 2]


def _ascii_tokens(text: str) -> list[str]:
    """``_word_tokens`` of ASCII text, the common case, inline: a lowercase word or a number
    (no case or digit boundary inside) is its own one token."""
    out: list[str] = []
    for run in _word().findall(text):
        if (run.isalpha() and run.islower()) or run.isdigit():
            out.append(run)
            continue
        out.append(run.lower())
        parts = _identifier_parts(run)
        if len(parts) > 1:
            out.extend(part.lower() for part in parts)
    return out


def _tokens(text: str, *, unigrams: bool) -> Iterator[str]:
    if text.isascii():
        # NFKC leaves ASCII alone and it holds no CJK: one chunk, and (as below) no ICU pass.
        yield from _ascii_tokens(text)
        return
    for match in _chunk().finditer(_normalise(text)):
        cjk, other = match.groups()
        if cjk is not None:
            yield from _cjk_tokens(cjk, unigrams=unigrams)
        elif other.isascii():
            # UAX #29 never breaks inside a run of ASCII letters and digits, so for ASCII
            # the ICU pass cannot change the runs _word_tokens finds: skip it (most of the
            # cost of tokenizing a fact).
            yield from _word_tokens(other)
        else:
            for segment in _word_segments(other):
                yield from _word_tokens(segment)


def index_tokens(text: str) -> list[str]:
    """Tokens to store in the FTS5 index for ``text`` (duplicates kept for bm25 term
    frequency, in text order)."""
    return list(_tokens(text, unigrams=True))


def query_tokens(text: str) -> list[str]:
    """Tokens to search for ``text``, deduplicated, in first-seen order.

    CJK runs give bigrams only (a unigram would match nearly every CJK fact); a
    one-character run gives its unigram, which the index always stores.
    """
    return list(dict.fromkeys(_tokens(text, unigrams=False)))


def fts_match(text: str) -> str | None:
    """An FTS5 MATCH expression: the OR of the query tokens as quoted strings, or None
    when the query has no tokens (FTS5 rejects an empty expression)."""
    tokens = query_tokens(text)
    if not tokens:
        return None
    return " OR ".join('"' + token.replace('"', '""') + '"' for token in tokens)


def index_text(text: str) -> str:
    """The value stored in the FTS5 column: index tokens joined by single spaces."""
    return " ".join(index_tokens(text))


# Function words carry no topic: a query's coverage (see ``query_units``) ignores them.
# English question and function words, and the CJK question forms users type ("how do
# I…", "怎么…", "어떻게…"); hiragana alone is Japanese grammar (particles, endings) and
# is ignored by ``query_units`` itself.
STOPWORDS = frozenset("""
a about above after again all also am an and any are as at be been before being below
between both but by can could did do does doing done for from further get gets got had has
have having he her here hers him his how i if in into is it its itself just me more most my
no nor not now of off on once only or other our ours out over own please same she should
so some such than that the their them then there these they this those through to too
under until up us very was we were what when where which while who whom why will with
would you your yours ok okay thanks want need needs know tell way ways thing
things something anything does dont doesn isn aren wasn don t s
怎么 什么 为什 哪里 哪儿 哪个 如何 多少 是否 请问
어떻 떻게 무엇 무슨 언제 어디 하나 나요 되나 있나 합니 니까 인가 는지 을까 할까
""".split())

@functools.cache
def _hiragana() -> re.Pattern[str]:
    return re.compile("[\u3041-\u3096\u309d-\u309f]")


def query_units(text: str) -> list[tuple[str, tuple[str, ...], bool]]:
    """The units whose share a matching memory must cover: (unit, the index tokens any of
    which covers it, whether it carries topic).  A cover ending in ``*`` is a prefix.

    A word is one unit, covered by itself or, for English words, by any word sharing its
    stem (``migrations`` is covered by ``migrate``, ``deploying`` by ``deploy``).  A CJK run counts per character, covered by
    either query bigram around it, so the bigrams a query forms across word boundaries
    (数据库怎么 -> 库怎) do not dilute the share as if they were words.  Function words,
    CJK question forms and hiragana carry no topic."""
    units: dict[str, tuple[set[str], bool]] = {}

    def put(unit: str, covers: set[str], topical: bool) -> None:
        have = units.get(unit)
        if have is None:
            units[unit] = (covers, topical)
        else:
            have[0].update(covers)
            units[unit] = (have[0], have[1] and topical)

    for match in _chunk().finditer(_normalise(text)):
        cjk, other = match.groups()
        if cjk is None:
            for segment in _word_segments(other):
                for token in _word_tokens(segment):
                    stem = _stem(token)
                    put(token, {token, stem + "*"} if stem else {token}, token not in STOPWORDS)
            continue
        if len(cjk) == 1:
            put(cjk, {cjk}, not _hiragana().match(cjk))
            continue
        grams = [cjk[i:i + 2] for i in range(len(cjk) - 1)]
        for i, ch in enumerate(cjk):
            around = [g for g in grams[max(0, i - 1):i + 1]]
            topical = not _hiragana().match(ch) and not any(g in STOPWORDS for g in around)
            put(ch, set(around), topical)
    return [(u, tuple(sorted(c)), t) for u, (c, t) in units.items()]


_SUFFIXES = ("ations", "ation", "ments", "ment", "ings", "ing", "ions", "ion", "ies", "es", "ed", "s", "e")


def _stem(token: str) -> str | None:
    """A crude English stem for prefix matching (None when the word is short or not ASCII
    letters): enough to join plural, -ing, -ed and -ation forms without a stemming library."""
    if len(token) < 4 or not token.isascii() or not token.isalpha():
        return None
    for suffix in _SUFFIXES:
        if token.endswith(suffix) and len(token) - len(suffix) >= 4:
            stem = token[: -len(suffix)]
            if len(stem) > 4 and stem[-1] == stem[-2] and stem[-1] not in "aeiousl":
                stem = stem[:-1]  # committing -> commit, not committ
            return stem
    return token
