#!/usr/bin/env python3
"""Update the vendored gitleaks rule set (realmem/gate/gitleaks/gitleaks.toml, MIT).

    scripts/update-gitleaks.py                       # latest master from GitHub
    scripts/update-gitleaks.py --ref v8.28.0         # a tag, branch or commit
    scripts/update-gitleaks.py --git ~/src/gitleaks  # offline, from a local clone (git show REF:...)

Fetches config/gitleaks.toml and LICENSE at the ref, loads the rules with realmem's own loader
(realmem.gate.safety.load_gitleaks) and refuses the update when a content rule no longer compiles
(extend realmem.gate.safety._go_regex first), then writes the three files atomically:
gitleaks.toml, gitleaks.LICENSE and gitleaks.source (the repository, commit and date).
Run the safety tests afterwards: `.venv/bin/python -m pytest tests/gate/test_safety.py -q`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

from vendoring import write_atomic

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "realmem" / "gate" / "gitleaks"
REPO = "gitleaks/gitleaks"


def _http(url: str) -> bytes:
    req = urllib.request.Request(url, headers={"User-Agent": "realmem-update-gitleaks"})
    with urllib.request.urlopen(req, timeout=30) as resp:  # noqa: S310 (fixed https URLs)
        return resp.read()


def from_github(ref: str) -> tuple[str, bytes, bytes]:
    commit = json.loads(_http(f"https://api.github.com/repos/{REPO}/commits/{ref}"))["sha"]
    raw = f"https://raw.githubusercontent.com/{REPO}/{commit}"
    return commit, _http(f"{raw}/config/gitleaks.toml"), _http(f"{raw}/LICENSE")


def from_git(git_dir: str, ref: str) -> tuple[str, bytes, bytes]:
    def git(*args: str) -> bytes:
        return subprocess.run(["git", "-C", git_dir, *args], check=True, capture_output=True).stdout

    commit = git("rev-parse", f"{ref}^{{commit}}").decode().strip()
    return commit, git("show", f"{commit}:config/gitleaks.toml"), git("show", f"{commit}:LICENSE")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ref", default="master", help="tag, branch or commit (default: master)")
    ap.add_argument("--git", metavar="DIR", help="read from a local clone instead of GitHub")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from realmem.gate.safety import load_gitleaks

    commit, toml, licence = from_git(args.git, args.ref) if args.git else from_github(args.ref)
    with tempfile.NamedTemporaryFile(suffix=".toml") as tmp:
        tmp.write(toml)
        tmp.flush()
        loaded = load_gitleaks(Path(tmp.name))
    broken = {rid: why for rid, why in loaded.skipped.items() if why != "needs a file path"}
    paths_only = sorted(rid for rid, why in loaded.skipped.items() if why == "needs a file path")
    print(f"gitleaks {commit[:12]}: {len(loaded.rules)} rules load, {len(paths_only)} need a file path "
          f"({', '.join(paths_only)})")
    if broken:
        for rid, why in sorted(broken.items()):
            print(f"  does not compile: {rid}: {why}", file=sys.stderr)
        print("not updated: extend realmem.gate.safety._go_regex for these rules first", file=sys.stderr)
        return 1
    write_atomic(RULES / "gitleaks.toml", toml)
    write_atomic(RULES / "gitleaks.LICENSE", licence)
    fetched = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    write_atomic(RULES / "gitleaks.source",
                 f"repository: https://github.com/{REPO}\ncommit: {commit}\nfile: config/gitleaks.toml\n"
                 f"licence: MIT (gitleaks.LICENSE)\nfetched: {fetched}\n".encode())
    print(f"updated {RULES / 'gitleaks.toml'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
