#!/usr/bin/env python3
"""Update the vendored detect-secrets patterns (realmem/gate/detect_secrets/patterns.json, Apache-2.0).

    scripts/update-detect-secrets.py                   # detect-secrets 1.5.0 from PyPI
    scripts/update-detect-secrets.py --version 1.6.0   # another release
    scripts/update-detect-secrets.py --wheel FILE.whl  # offline, from a downloaded wheel

Downloads the wheel with pip, installs it into a throwaway virtualenv (its plugins build their
regexes at import time, so they are read from the imported classes rather than parsed), and
writes every regex of every ``RegexBasedDetector`` plugin except the ones listed in SKIPPED.
The keyword and high-entropy plugins are not regex detectors and are never taken: realmem's own
assignment and generic rules cover that ground with its placeholder checks.  Refuses the update
when a pattern does not compile here.  Writes patterns.json, detect_secrets.LICENSE and
detect_secrets.source (version, wheel sha256, date) atomically.  Run the safety tests afterwards:
`.venv/bin/python -m pytest tests/gate/test_safety.py -q`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from datetime import datetime, timezone
from pathlib import Path

from vendoring import write_atomic

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "realmem" / "gate" / "detect_secrets"
# Public IPv4 addresses are not secrets: facts name servers by address all the time.
SKIPPED = {"IPPublicDetector": "a public IP address is not a secret"}

_EXTRACT = r"""
import importlib, json, pkgutil, re, sys
import detect_secrets.plugins as plugins
from detect_secrets.plugins.base import RegexBasedDetector
skipped = set(json.loads(sys.argv[1]))
out = []
for info in sorted(pkgutil.iter_modules(plugins.__path__), key=lambda i: i.name):
    mod = importlib.import_module("detect_secrets.plugins." + info.name)
    for name, cls in sorted(vars(mod).items()):
        if not (isinstance(cls, type) and issubclass(cls, RegexBasedDetector)
                and cls is not RegexBasedDetector and cls.__module__ == mod.__name__) or name in skipped:
            continue
        for rx in cls.denylist:
            flags = [f for f in ("IGNORECASE", "MULTILINE", "DOTALL", "VERBOSE") if rx.flags & getattr(re, f)]
            out.append({"plugin": name, "module": info.name, "secret_type": cls.secret_type,
                        "pattern": rx.pattern, "flags": flags})
print(json.dumps(out))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--version", default="1.5.0", help="detect-secrets release (default: 1.5.0)")
    ap.add_argument("--wheel", metavar="FILE", help="use this wheel instead of downloading one")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.wheel:
            wheel = Path(args.wheel)
        else:
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp,
                            f"detect-secrets=={args.version}"], check=True)
            wheel = next(Path(tmp).glob("detect_secrets-*.whl"))
        version = wheel.name.split("-")[1]
        sha256 = hashlib.sha256(wheel.read_bytes()).hexdigest()
        with zipfile.ZipFile(wheel) as zf:
            licence = next(zf.read(n) for n in zf.namelist() if n.endswith(".dist-info/LICENSE"))
        venv = Path(tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([venv / "bin" / "python", "-m", "pip", "install", "-q", str(wheel)], check=True)
        extracted = subprocess.run([venv / "bin" / "python", "-c", _EXTRACT, json.dumps(sorted(SKIPPED))],
                                   check=True, capture_output=True, text=True).stdout
    patterns = json.loads(extracted)
    broken = []
    for p in patterns:
        try:
            re.compile(p["pattern"], sum((getattr(re, f) for f in p["flags"]), 0))
        except re.error as exc:
            broken.append(f"{p['plugin']}: {exc}")
    if broken:
        print("not updated, patterns that do not compile:\n  " + "\n  ".join(broken), file=sys.stderr)
        return 1
    plugins = sorted({p["plugin"] for p in patterns})
    print(f"detect-secrets {version}: {len(patterns)} patterns from {len(plugins)} plugins; "
          f"skipped {', '.join(sorted(SKIPPED))}")
    doc = {"version": version, "skipped": SKIPPED, "patterns": patterns}
    write_atomic(OUT / "patterns.json", (json.dumps(doc, indent=1) + "\n").encode())
    write_atomic(OUT / "detect_secrets.LICENSE", licence)
    fetched = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    write_atomic(OUT / "detect_secrets.source",
                 f"package: https://pypi.org/project/detect-secrets/{version}/\nversion: {version}\n"
                 f"wheel: {wheel.name}\nsha256: {sha256}\nsource: detect_secrets/plugins/*.py (RegexBasedDetector.denylist)\n"
                 f"licence: Apache-2.0 (detect_secrets.LICENSE)\nfetched: {fetched}\n".encode())
    print(f"updated {OUT / 'patterns.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
