"""The `realmem` command line run as scripts run it: a real subprocess with --home and --cwd."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(sys.executable).with_name("realmem")


def run(home: Path, cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "realmem.interface.cli"]
    return subprocess.run([*cmd, "--home", str(home), "--cwd", str(cwd), *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=120)


def ok(home: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    p = run(home, cwd, *args)
    assert p.returncode == 0, (p.stdout, p.stderr)
    return p


def as_json(home: Path, cwd: Path, *args: str):
    return json.loads(ok(home, cwd, *args, "--json").stdout)
