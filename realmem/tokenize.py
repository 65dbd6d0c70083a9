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

import re
import threading
import unicodedata
from collections.abc import Iterator

import icu

# Characters that are letters or numbers to Python (Unicode 14) but separators to the
# unicode61 tokenizer bundled with SQLite (its tables still class them as marks).
_U61_SEPARATOR_LETTERS = "\u19b0-\u19c0\u19c8\u19c9\u1cf2\u1cf3"

# One unicode61 token character: a letter or number, minus the exceptions above.
_WORD = re.compile(rf"[^\W_{_U61_SEPARATOR_LETTERS}]+")

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
# Either a CJK run (group 1) or a run of anything else (group 2).
_CHUNK = re.compile(rf"([{_CJK_RANGES}]+)|([^{_CJK_RANGES}]+)")

# Kana voicing marks are combining marks too, but dropping them would turn が into か.
_KEPT_MARKS = frozenset("\u3099\u309a")

_local = threading.local()


def _word_breaker() -> icu.BreakIterator:
    """One ICU word BreakIterator per thread: creating one costs far more than using it."""
    breaker = getattr(_local, "breaker", None)
    if breaker is None:
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
    ustr = icu.UnicodeString(chunk)
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
    for run in _WORD.findall(segment):
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


def _tokens(text: str, *, unigrams: bool) -> Iterator[str]:
    for match in _CHUNK.finditer(_normalise(text)):
        cjk, other = match.groups()
        if cjk is not None:
            yield from _cjk_tokens(cjk, unigrams=unigrams)
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
