"""Test-only fault injection: ``REALMEM_TEST_FAULT=<step>[:stop]``.

Only tests set this variable.  When a write reaches the named step, this process kills
itself with SIGKILL (or, with ``:stop``, pauses itself with SIGSTOP until a SIGCONT), so the
tests prove that every step of a write heals in whichever process writes next.  The steps,
in order (``Realmem.emit``):

- ``lease-taken``: the write lease is held; nothing is appended yet;
- ``before-commit``: the events are appended inside the open transaction;
- ``after-commit``: the transaction committed; no fact file is written yet;
- ``after-file``: the first fact file was written or removed;
- ``before-position``: every file is written; the file projection's position is not.

A scan's batches (``FileProjector.one_flush``) add one more, after the last batch:

- ``scan-flushed``: every batch committed and its files written and flushed; the position of
  none of them is recorded.
"""

from __future__ import annotations

import os

ENV = "REALMEM_TEST_FAULT"


def point(step: str) -> None:
    spec = os.environ.get(ENV)
    if not spec:
        return
    name, _, action = spec.partition(":")
    if name == step:
        import signal  # lazily: a test-only hook, and every command imports this module
        os.kill(os.getpid(), signal.SIGSTOP if action == "stop" else signal.SIGKILL)
