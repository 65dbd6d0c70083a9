"""Bad command-line input is a usage error (exit 2), never a traceback (issue 10, item 10)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from realmem.interface.cli import cli


def run(home: Path, cwd: Path, *args: bytes | str) -> subprocess.CompletedProcess[bytes]:
    argv = [sys.executable.encode(), b"-m", b"realmem.interface.cli", b"--home", str(home).encode(), b"--cwd",
            str(cwd).encode(), *(a.encode() if isinstance(a, str) else a for a in args)]
    return subprocess.run(argv, capture_output=True, env={**os.environ, "REALMEM_WORKER_AUTOSTART": "0"}, timeout=120)


@pytest.mark.parametrize("args", [
    [b"add", b"--caption", b"caf\xe9 latin-1", b"--content", b"x"],
    [b"remember", b"--caption", b"ok", b"--content", b"\xff\xfe"],
    [b"debug", b"--caption", b"\xc3", b"--content", b"x"],
    [b"recall", b"\xed\xa0\x80"],  # an encoded surrogate: not UTF-8 either
    [b"add", b"--caption", b"ok", b"--content", b"x", b"--path", b"src/\xff"],
    [b"show", b"\x80"],
])
def test_invalid_utf8_arguments_are_usage_errors(home: Path, repo: Path, args: list[bytes]) -> None:
    out = run(home, repo, *args)
    assert out.returncode == 2, out.stderr
    assert b"Traceback" not in out.stderr and b"not valid UTF-8" in out.stderr
    assert not list(repo.glob(".pi/realmem/*.md"))


def test_invalid_utf8_home_is_a_usage_error(tmp_path: Path, repo: Path) -> None:
    out = subprocess.run([sys.executable.encode(), b"-m", b"realmem.interface.cli", b"--home",
                          str(tmp_path).encode() + b"/h\xff", b"status"], capture_output=True, cwd=repo, timeout=120)
    assert out.returncode == 2 and b"Traceback" not in out.stderr


@pytest.mark.parametrize("command", ["add", "remember", "debug"])
@pytest.mark.parametrize("field", ["--caption", "--content"])
def test_a_nul_in_caption_or_content_is_a_usage_error(home: Path, repo: Path, command: str, field: str) -> None:
    args = {"--caption": "A caption", "--content": "Some content"}
    args[field] = args[field][:3] + "\x00" + args[field][3:]
    result = CliRunner().invoke(cli, ["--home", str(home), "--cwd", str(repo), command, *sum(args.items(), ())])
    assert result.exit_code == 2, result.output
    assert "NUL" in result.output
    assert isinstance(result.exception, SystemExit)  # a usage error, not a crash
    assert not list(repo.glob(".pi/realmem/*.md"))


def test_good_unicode_arguments_still_work(home: Path, repo: Path) -> None:
    out = run(home, repo, "add", "--caption", "Déploiement: 先に staging", "--content", "naïve ✓")
    assert out.returncode == 0, out.stderr


def test_a_missing_cwd_is_a_usage_error_and_creates_nothing(home: Path, tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "dir"
    out = run(home, missing, "add", "--caption", "A fact", "--content", "x")
    assert out.returncode == 2 and b"not an existing directory" in out.stderr
    assert not (tmp_path / "no").exists()


def test_the_core_refuses_nul_and_lone_surrogates_from_any_entry_point(home: Path, repo: Path) -> None:
    from realmem.write import memories
    from realmem.app import RealmemError
    from realmem.write.observe import open_attached
    with open_attached(home, repo) as app:
        store, stored = memories.place(app, "shared", None)
        for caption, content in (("a\x00b", "x"), ("ok", "x\x00y"), ("lone \ud800", "x"), ("ok", "\udfff")):
            with pytest.raises(RealmemError, match="NUL|surrogate"):
                memories.add(app, caption, content, store=store, stored_paths=stored, source="add")
        assert app.memories() == []
