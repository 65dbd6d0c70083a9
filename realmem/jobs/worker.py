"""`realmem worker`: the background consumer of one REALMEM_HOME.

A simple loop over the Huey queue (no Huey consumer threads or signal handlers): dequeue a
task and execute it; when the queue is empty, retry queued candidates that are due (their
``next_try`` passed; the backoff doubles per attempt up to queue.maxBackoffSeconds) and follow
the log (``jobs.policy``): the events any process appended since are turned into tasks.  On
start it re-derives everything (due candidates, memories lacking embeddings, memories whose
urgency is missing or stale), so deleting the Huey database loses nothing; it does so again
when an endpoint setting changes, since that work follows from no event.

Only one worker runs per home: it holds the ``worker`` LeaseLock for its lifetime; a second
one exits at once.  It exits after ``worker.idleSeconds`` without work (a queued candidate
waiting for its next try keeps it alive while the judge is configured, so automatic retry
needs no new wake-up, until the backoff outgrows the idle timeout).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from realmem.config import Config
from realmem.events import log as evlog
from realmem.gate import availability
from realmem.jobs import policy, queue
from realmem.jobs.embed import run_embed
from realmem.jobs.retry import retry_due
from realmem.jobs.urgency import run_urgency
from realmem.storage import db, fsutil
from realmem.storage.lock import LockTimeout, single_instance, stop_requested
from realmem.stores.project import detect, forget_cache
from realmem.logs import get_logger
from realmem.projections import queries

log = get_logger("realmem.worker")

POLL_SECONDS = 0.2
CONFIG_SECONDS = 5.0
LOCK_WAIT_SECONDS = 3.0


def _waiting(conn, cfg, idle: float) -> bool:  # type: ignore[no-untyped-def]
    """Queued candidates the worker should stay alive for: the judge is configured and some
    candidate's next try falls within the idle timeout.  Once the backoff grows past it the
    worker exits (a later remember or session start brings a new one), so a judge that is gone
    for good never keeps a worker alive forever."""
    if availability.judge(cfg) is None:
        return False
    from datetime import datetime, timedelta, timezone
    horizon = (datetime.now(timezone.utc) + timedelta(seconds=idle)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return queries.any_due_by(conn, horizon)


def _due(conn) -> bool:  # type: ignore[no-untyped-def]
    return queries.any_due_by(conn, evlog.now_iso())


def _endpoints(cfg) -> tuple[object, ...]:  # type: ignore[no-untyped-def]
    """The settings that decide which background work exists at all."""
    return tuple(cfg[k] for k in ("embedding.url", "embedding.model", "embedding.local", "semif.url", "judge.fallback",
                                  "rewriter.url"))


def rederive(home: Path) -> int:
    """All unfinished work from the database; returns how many units were done."""
    done = 0
    for step in (retry_due, run_embed, run_urgency):
        try:
            done += int(step(home) or 0)
        except LockTimeout:
            log.warning("worker.lock_busy", step=step.__name__)
        except Exception:
            log.exception("worker.step_failed", step=step.__name__)
    return done


def run(home: Path, *, idle_seconds: float | None = None) -> int:
    home = Path(home).resolve()
    fsutil.private_dir(home)
    conn = db.connect(home / "realmem.sqlite")  # migrates before the lock table is used
    lock = single_instance(home / "realmem.sqlite", "worker", timeout=LOCK_WAIT_SECONDS)
    if lock is None:
        log.info("worker.already_running")
        conn.close()
        return 0
    stopping = stop_requested()
    cfg = Config(home)
    idle = float(idle_seconds if idle_seconds is not None else cfg["worker.idleSeconds"])
    log.info("worker.started", pid=os.getpid(), idle_seconds=idle)
    try:
        huey = queue.open_checked(home)  # a damaged queue.sqlite is set aside and made anew
        rederive(home)  # a starting worker re-derives all work; the follower takes it from here
        policy.follow(conn, home, cfg)
        last_work = last_config = time.monotonic()
        last_endpoints = _endpoints(cfg)
        while not stopping():
            task = None
            try:
                task = huey.dequeue()
            except Exception as exc:
                if not queue.is_damaged(exc):
                    log.exception("worker.dequeue_failed")
                else:  # damaged while running: a new queue, and the work it held re-derived
                    queue.set_aside(home, f"{type(exc).__name__}: {exc}")
                    huey = queue.open_checked(home)
                    rederive(home)
                    continue
            if task is not None:
                try:
                    huey.execute(task)
                except Exception:
                    log.exception("worker.task_failed", task=getattr(task, "name", "?"))
                last_work = time.monotonic()
                continue
            did = 0
            if _due(conn) and availability.judge(cfg) is not None:  # due first: the bridge check reads files
                try:
                    did = retry_due(home)
                except LockTimeout:
                    pass
                except Exception:
                    log.exception("worker.retry_failed")
            did += len(policy.follow(conn, home, cfg))  # what any process wrote since: queued, done next
            now = time.monotonic()
            if now - last_config >= CONFIG_SECONDS:
                cfg.reload()
                endpoints = _endpoints(cfg)
                if endpoints != last_endpoints:  # an endpoint set or changed: its work is in no event
                    did += rederive(home)
                    last_endpoints = endpoints
                last_config = now
            if did:
                last_work = time.monotonic()
                continue
            if now - last_work >= idle and not _waiting(conn, cfg, idle):
                break
            if not home.is_dir():
                log.info("worker.home_gone", home=str(home))  # e.g. a test's temp home was removed
                break
            time.sleep(POLL_SECONDS)
    finally:
        lock.release()
        conn.close()
        log.info("worker.stopped", pid=os.getpid())
    return 0
