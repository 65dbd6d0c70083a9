"""Secrets never at rest (issue 10, item 7).  After every refusal or redaction, no file under
REALMEM_HOME or the project holds the secret's bytes: not the event log (realmem.sqlite and
its -wal, read while the store is still open), the Huey db, the fact files, the config, nor
the log lines the commands wrote.  Secrets are made at test time (tests/corpus/secrets.txt
shapes with random bodies)."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from realmem import logs
from realmem.app import Realmem
from realmem.gate.remember import remember
from realmem.interface.render import outcome_text
from realmem.write.attached import open_attached

from helpers.corpus import expand

SCRIPT = Path(sys.executable).parent / "realmem"

# (caption, content template): families from the misses and the common ones
CANDIDATES = [
    ("npm publish token", "Publish with npm_<<A:36>>."),
    ("DigitalOcean token", "doctl auth init -t dop_v1_<<H:64>>"),
    ("Twilio credentials", "The Twilio auth token is <<H:32>> for the SMS sender."),
    ("Registry login", '~/.docker/config.json has {"auths": {"ghcr.io": {"auth": "<<BASIC>>"}}}'),
    ("GitHub token", "Deploy with ghp_<<A:36>> from CI."),
    ("Staging database", "Connect with postgres://admin:<<A:18>>@db.internal:5432/app"),
    ("Deploy key", "Staging deploy key:\n<<PEM>>"),
]


def make(seed: int) -> list[tuple[str, str, tuple[str, ...]]]:
    rng = random.Random(seed)
    out = []
    for caption, template in CANDIDATES:
        content, parts = expand(template, rng)
        out.append((caption, content, parts))
    return out


def holders(parts: tuple[str, ...], *roots: Path) -> list[str]:
    """Every file under the roots that contains any of the secret parts, as bytes."""
    found = []
    for root in roots:
        for dirpath, _, names in os.walk(root):
            for name in names:
                path = Path(dirpath, name)
                if path.is_symlink() or not path.is_file():
                    continue
                data = path.read_bytes()
                found += [f"{path}: {part[:6]}..." for part in parts if part.encode() in data]
    return found


def cli(home: Path, cwd: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    cmd = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "realmem.interface.cli"]
    return subprocess.run([*cmd, "--home", str(home), "--cwd", str(cwd), *args], capture_output=True, text=True,
                          env={**os.environ, "REALMEM_LOG": "debug", **env}, timeout=120)


def remember_cli(home: Path, repo: Path, caption: str, content: str, env: dict[str, str],
                 *args: str) -> subprocess.CompletedProcess[str]:
    p = cli(home, repo, "remember", "--caption", caption, "--content", content, "--json", *args, env=env)
    # the command's own log lines are part of what must stay clean: keep them under the home
    logs = home / "test-logs"
    logs.mkdir(exist_ok=True)
    with (logs / "cli.log").open("a", encoding="utf-8") as fh:
        fh.write(p.stdout + p.stderr)
    return p


@pytest.fixture
def app(home: Path, repo: Path, servers):  # type: ignore[no-untyped-def]
    a = open_attached(home, repo)
    yield a
    a.close()


def test_refused_candidates_leave_no_trace_while_the_store_is_open(app: Realmem, home: Path, repo: Path):
    all_parts: list[str] = []
    for caption, content, parts in make(1):
        out = remember(app, caption, content)
        assert out.action == "refuse", (caption, outcome_text(out))
        assert not any(p in outcome_text(out) for p in parts)
        all_parts += parts
        # the WAL is read before any checkpoint: the store is still open
        assert holders(parts, home, repo) == []
    assert (home / "realmem.sqlite-wal").exists() or (home / "realmem.sqlite").exists()
    assert holders(tuple(all_parts), home, repo) == []


def test_redacted_candidates_store_only_the_redacted_text(home: Path, repo: Path, servers,  # type: ignore[no-untyped-def]
                                                           monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("REALMEM_SAFETY_REDACT", "1")
    with open_attached(home, repo) as redacting:
        for caption, content, parts in make(2):
            out = remember(redacting, caption, content)
            assert out.action != "refuse", (caption, outcome_text(out))
            assert "[REDACTED:" in out.trace.candidate.content
            assert holders(parts, home, repo) == [], caption
        assert "[REDACTED:" in (home / "realmem.sqlite").read_bytes().decode("latin-1") + (
            (home / "realmem.sqlite-wal").read_bytes().decode("latin-1")
            if (home / "realmem.sqlite-wal").exists() else "")


def test_cli_refusal_leaves_no_trace_in_store_logs_or_queue(home: Path, repo: Path, servers):
    all_parts: list[str] = []
    for caption, content, parts in make(3):
        p = remember_cli(home, repo, caption, content, env={})
        assert p.returncode == 1, (p.stdout, p.stderr)
        assert '"action": "refuse"' in p.stdout
        all_parts += parts
    assert (home / "test-logs" / "cli.log").stat().st_size > 0
    assert holders(tuple(all_parts), home, repo) == []


def test_cli_redaction_queued_then_retried_leaves_no_trace(home: Path, repo: Path):
    """Redaction on and the judge down (connection refused): the candidate is queued (pending
    row, Queued event, a Huey retry job in queue.sqlite), then processed by ``retry`` once the
    judge answers; the secret is nowhere."""
    from realmem.fakes import FakeChat, FakeEmbeddings, FakeSystemOne

    with socket.socket() as sock:  # a loopback port that nothing listens on
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    env = {"REALMEM_SAFETY_REDACT": "1", "REALMEM_WORKER_AUTOSTART": "0", "REALMEM_SEMIF_URL": dead}
    all_parts: list[str] = []
    for caption, content, parts in make(4):
        p = remember_cli(home, repo, caption, content, env)
        assert p.returncode == 0, (p.stdout, p.stderr)
        assert '"queued": true' in p.stdout, p.stdout
        all_parts += parts
    assert (home / "queue.sqlite").exists()  # the Huey db is among the files searched
    assert (home / "realmem.log").stat().st_size > 0  # so is the CLI's own log (REALMEM_LOG=debug)
    assert holders(tuple(all_parts), home, repo) == []
    s1, emb, chat = FakeSystemOne().start(), FakeEmbeddings().start(), FakeChat().start()
    try:
        env |= {"REALMEM_SEMIF_URL": s1.url, "REALMEM_EMBEDDING_URL": emb.url, "REALMEM_REWRITER_URL": chat.url}
        p = cli(home, repo, "retry", env=env)
        assert p.returncode == 0, (p.stdout, p.stderr)
        assert "Nothing queued" not in p.stdout
        (home / "test-logs" / "retry.log").write_text(p.stdout + p.stderr, encoding="utf-8")
        stored = cli(home, repo, "list", "--json", env=env)
        assert stored.stdout.count("[REDACTED:") >= len(CANDIDATES) - 1, stored.stdout  # one may merge
    finally:
        for s in (s1, emb, chat):
            s.stop()
    assert holders(tuple(all_parts), home, repo) == []


def test_log_values_are_masked() -> None:
    """The last line of defence: a log value quoting a secret (an error echoing its input)."""
    secret, _ = expand("ghp_<<A:36>>", random.Random(5))
    event = logs._mask_values(None, "warning", {"event": "rpc usage error", "error": f"bad value {secret}"})
    assert event == {"event": "rpc usage error", "error": "bad value [REDACTED:github-pat]"}
