"""structlog setup: JSON lines to a log file in REALMEM_HOME, or to stderr.

The CLI writes its log to ``<home>/realmem.log`` (the worker to ``<home>/worker.log``), so a
user never sees raw JSON on the terminal; ``--verbose`` sends it to stderr instead.  The rpc
child logs to stderr, which the adapter reads (docs/rpc.md).  stdout belongs to rpc and
--json output.

Secrets never reach a log line: the clients log URLs and statuses only, and this processor
masks any value under a key that looks like a credential and any secret the safety scan finds
inside a text value, as a last line of defence.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any, TextIO

import structlog


_SECRET_KEYS = ("key", "token", "secret", "password", "authorization", "api_key", "apikey")
MAX_LOG_BYTES = 5 * 1024 * 1024  # then the log moves to <name>.1 and starts again


def _mask(_: Any, __: str, event: dict[str, Any]) -> dict[str, Any]:
    for k in list(event):
        if any(s in k.lower() for s in _SECRET_KEYS) and k != "event":
            event[k] = "****"
    return event


def _mask_values(_: Any, __: str, event: dict[str, Any]) -> dict[str, Any]:
    """Secrets inside any text value (an error message quoting its input, say) are masked too."""
    # Imported at the first log line, not with this module: the scanner's rules cost more
    # start-up than a quiet command like `status` spends on everything else.
    from realmem.gate.safety import mask_secrets

    for k, v in event.items():
        if isinstance(v, str) and v:
            event[k] = mask_secrets(v)
    return event


class LogFile:
    """An append-only log file opened on the first line (a command that logs nothing creates
    nothing), private (0600), rotated once it outgrows MAX_LOG_BYTES."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: TextIO | None = None

    def _open(self) -> TextIO:
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                if self.path.stat().st_size > MAX_LOG_BYTES:
                    os.replace(self.path, self.path.with_name(self.path.name + ".1"))
            except OSError:
                pass
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            self._fh = os.fdopen(fd, "a", encoding="utf-8")
        return self._fh

    def write(self, text: str) -> int:
        try:
            return self._open().write(text)
        except OSError:
            return 0  # a log that cannot be written never fails the command

    def flush(self) -> None:
        if self._fh is not None:
            try:
                self._fh.flush()
            except OSError:
                pass


def level_name(level: str | None = None) -> str:
    """``level`` as REALMEM_LOG overrides it (default warning), upper case; an unknown name is WARNING."""
    name = (os.environ.get("REALMEM_LOG") or level or "warning").upper()
    return name if name in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL") else "WARNING"


def configure(level: str | None = None, *, file: Path | None = None) -> None:
    """Log at ``level`` (REALMEM_LOG overrides it; default warning) to ``file``, else stderr."""
    name = level_name(level)
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _mask,
            _mask_values,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, name, logging.WARNING)),
        logger_factory=structlog.PrintLoggerFactory(file=LogFile(file) if file is not None else sys.stderr),
        cache_logger_on_first_use=True,
    )
