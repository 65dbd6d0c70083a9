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
    from realmem.write.attached import open_attached
    with open_attached(home, repo) as app:
        store, stored = memories.place(app, "shared", None)
        for caption, content in (("a\x00b", "x"), ("ok", "x\x00y"), ("lone \ud800", "x"), ("ok", "\udfff")):
            with pytest.raises(RealmemError, match="NUL|surrogate"):
                memories.add(app, caption, content, store=store, stored_paths=stored, source="add")
        assert app.memories() == []


def _run_env(cwd: Path, extra: dict[bytes, bytes], *args: bytes) -> subprocess.CompletedProcess[bytes]:
    """The CLI with environment variables given as bytes (undecodable ones included)."""
    env = {k.encode(): v.encode() for k, v in os.environ.items()}
    env.update({b"REALMEM_WORKER_AUTOSTART": b"0", **extra})
    return subprocess.run([sys.executable.encode(), b"-m", b"realmem.interface.cli", *args], capture_output=True,
                          env=env, cwd=cwd, timeout=120)


@pytest.mark.parametrize("kind", ["symlink loop", "not UTF-8"])
def test_a_realmem_home_that_cannot_be_used_is_a_usage_error(tmp_path: Path, repo: Path, kind: str) -> None:
    if kind == "symlink loop":
        (tmp_path / "a").symlink_to(tmp_path / "b")
        (tmp_path / "b").symlink_to(tmp_path / "a")
        home = str(tmp_path / "a").encode()
    else:
        home = str(tmp_path).encode() + b"/h\xff"
    out = _run_env(repo, {b"REALMEM_HOME": home}, b"status")
    assert out.returncode == 2, out.stderr
    assert b"Traceback" not in out.stderr and b"realmem home" in out.stderr
    assert (b"Symlink loop" if kind == "symlink loop" else b"not valid UTF-8") in out.stderr


def test_settings_from_the_environment_that_are_not_utf8_are_usage_errors_that_never_show_a_key(
        home: Path, repo: Path) -> None:
    out = _run_env(repo, {b"REALMEM_HOME": str(home).encode(), b"REALMEM_SEMIF_URL": b"http://127.0.0.1:9/\xff"},
                   b"remember", b"--caption", b"Use uv", b"--content", b"Run uv sync.")
    assert out.returncode == 2 and b"Traceback" not in out.stderr and b"REALMEM_SEMIF_URL" in out.stderr, out.stderr
    secret = "sk-" + os.urandom(12).hex()  # made at test time: no literal key in the repository
    for raw in (secret.encode() + b"\xff", secret.encode() + "\u00e9".encode(), secret.encode() + b"\n"):
        out = _run_env(repo, {b"REALMEM_HOME": str(home).encode(), b"REALMEM_SEMIF_URL": b"http://127.0.0.1:9",
                              b"REALMEM_SEMIF_KEY": raw},
                       b"remember", b"--caption", b"Use uv", b"--content", b"Run uv sync.")
        assert out.returncode == 2 and b"Traceback" not in out.stderr, out.stderr
        assert b"REALMEM_SEMIF_KEY" in out.stderr and secret.encode() not in out.stderr + out.stdout
    # A key named by reference ($VAR) is refused naming the variable it came from.
    out = _run_env(repo, {b"REALMEM_HOME": str(home).encode(), b"REALMEM_SEMIF_URL": b"http://127.0.0.1:9",
                          b"REALMEM_SEMIF_KEY": b"$MY_SEMIF_KEY", b"MY_SEMIF_KEY": secret.encode() + b"\t"},
                   b"remember", b"--caption", b"Use uv", b"--content", b"Run uv sync.")
    assert out.returncode == 2 and b"MY_SEMIF_KEY holds characters" in out.stderr, out.stderr
    assert secret.encode() not in out.stderr + out.stdout
    assert not list(repo.glob(".pi/realmem/*.md"))
