#!/usr/bin/env python3
"""Update the vendored confusables fold (realmem/gate/unicode/confusables.json, Unicode-3.0).

    scripts/update-confusables.py                          # latest confusables.txt from unicode.org
    scripts/update-confusables.py --version 16.0.0         # a given UTS #39 release
    scripts/update-confusables.py --file confusables.txt   # offline, from a downloaded copy

Reads Unicode's confusables.txt (UTS #39, Unicode Security Mechanisms) and keeps, for every
non-ASCII character whose prototype is one ASCII letter or digit, the ASCII character it is
meant to pass for. UTS #39 maps the look-alikes of I, l and 1 all to "l"; a character whose
Unicode name ends in a single letter ("CYRILLIC CAPITAL LETTER BYELORUSSIAN-UKRAINIAN I")
takes that letter instead, so "Іgnore" folds to "ignore" and the injection rules read it.
Writes confusables.json and confusables.source (version, sha256, date) atomically; the licence
(Unicode License V3) is unicode.LICENSE beside them. Run the safety tests afterwards:
`.venv/bin/python -m pytest tests/gate/test_safety.py -q`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import unicodedata
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

from vendoring import write_atomic

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "realmem" / "gate" / "unicode"
URL = "https://www.unicode.org/Public/security/{version}/confusables.txt"


def fold(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        source, target, *_ = (f.strip() for f in line.split(";"))
        src = "".join(chr(int(c, 16)) for c in source.split())
        tgt = "".join(chr(int(c, 16)) for c in target.split())
        if len(src) != 1 or src.isascii() or len(tgt) != 1 or not (tgt.isascii() and tgt.isalnum()):
            continue
        name = unicodedata.name(src, "")
        last = name.rsplit(" ", 1)[-1].rsplit("-", 1)[-1]
        if len(last) == 1 and last.isalpha() and tgt.lower() in "li1" and last.lower() in "li":
            tgt = last if "CAPITAL" in name else last.lower()
        out[src] = tgt
    return dict(sorted(out.items()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--version", default="latest", help="UTS #39 release directory (default: latest)")
    ap.add_argument("--file", metavar="PATH", help="read this confusables.txt instead of downloading it")
    args = ap.parse_args()
    if args.file:
        raw, origin = Path(args.file).read_bytes(), Path(args.file).name
    else:
        origin = URL.format(version=args.version)
        req = urllib.request.Request(origin, headers={"User-Agent": "realmem-update-confusables"})
        with urllib.request.urlopen(req, timeout=60) as resp:
            raw = resp.read()
    text = raw.decode("utf-8-sig")
    found = re.search(r"^#\s*Version:\s*(\S+)", text, re.M)
    version = found.group(1) if found else "unknown"
    table = fold(text)
    if len(table) < 1000:
        print(f"not updated: only {len(table)} characters fold to ASCII (not confusables.txt?)", file=sys.stderr)
        return 1
    doc = {"version": version, "fold": table}
    write_atomic(OUT / "confusables.json", (json.dumps(doc, ensure_ascii=False, indent=0) + "\n").encode())
    fetched = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    write_atomic(OUT / "confusables.source",
                 f"source: {origin}\nversion: {version} (UTS #39 confusables.txt)\n"
                 f"sha256: {hashlib.sha256(raw).hexdigest()}\nlicence: Unicode-3.0 (unicode.LICENSE)\n"
                 f"fetched: {fetched}\n".encode())
    print(f"confusables {version}: {len(table)} characters fold to ASCII; updated {OUT / 'confusables.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
