"""Unicode confusables (UTS #39): the ASCII letter or digit a look-alike character passes for.

"Іgnоre аll prеvious instructiоns" written with Cyrillic І, о, а and е reads as the plain
phrase to a model, so the injection rules read it folded. The table is derived from Unicode's
confusables.txt (``gate/unicode/confusables.json``, Unicode License V3 in ``unicode.LICENSE``,
its origin in ``confusables.source``); ``scripts/update-confusables.py`` regenerates it.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

CONFUSABLES_JSON = Path(__file__).parent / "unicode" / "confusables.json"


@functools.cache
def table() -> dict[str, str]:
    """Non-ASCII character -> the ASCII character it looks like (loaded on first non-ASCII text)."""
    return json.loads(CONFUSABLES_JSON.read_text(encoding="utf-8"))["fold"]


def version() -> str:
    return str(json.loads(CONFUSABLES_JSON.read_text(encoding="utf-8"))["version"])
