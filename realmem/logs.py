"""structlog setup: JSON lines to a log file in REALMEM_HOME, or to stderr.

The CLI writes its log to ``<home>/realmem.log`` (the worker to ``<home>/worker.log``), so a
user never sees raw JSON on the terminal; ``--verbose`` sends it to stderr instead.  The rpc
child logs to stderr, which the adapter reads (docs/rpc.md).  stdout belongs to rpc and
--json output.

Secrets never reach a log line: the clients log URLs and statuses only, and this processor
masks any value under a key that looks like a credential and any secret the safety scan finds
inside a text value, as a last line of defence.

structlog itself (and the asyncio it pulls in) is imported at the first log line that passes
the level, not with this module: a quiet command like `status` never pays for it.  Every
realmem module takes its logger from ``get_logger`` here, so no log line can be written before
``configure``'s settings are in place.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, TextIO


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


# The level of each logging method (logging's numbers); any other attribute (bind, log...) loads structlog.
_LEVELS = {"debug": 10, "info": 20, "msg": 20, "warning": 30, "warn": 30, "error": 40, "exception": 40,
           "critical": 50, "fatal": 50}
_settings: tuple[str, Path | None] | None = None  # configure()'s, until structlog is loaded
_threshold = 0  # calls below this level are dropped without loading structlog


class Logger:
    """What ``get_logger`` returns: structlog's logger, loaded at its first call that passes
    the configured level (for start-up time)."""

    __slots__ = ("_name", "_real")

    def __init__(self, name: str | None) -> None:
        self._name = name
        self._real: Any = None

    def __getattr__(self, attr: str) -> Any:
        if _LEVELS.get(attr, _threshold) < _threshold:
            return _drop
        if self._real is None:
            self._real = _structlog().get_logger(self._name)  # structlog's own proxy: follows reconfiguration
        return getattr(self._real, attr)


def _drop(*args: Any, **kw: Any) -> None:
    return None


def get_logger(name: str | None = None) -> Logger:
    return Logger(name)


def _structlog() -> Any:
    """structlog, configured as ``configure`` last asked."""
    global _settings
    import structlog  # here, not at the top: for start-up time

    if _settings is not None:
        name, file = _settings
        _settings = None
        _apply(structlog, name, file)
    return structlog


def configure(level: str | None = None, *, file: Path | None = None) -> None:
    """Log at ``level`` (REALMEM_LOG overrides it; default warning) to ``file``, else stderr."""
    global _settings, _threshold
    name = level_name(level)
    _threshold = _LEVELS[name.lower()]
    _settings = (name, file)
    if "structlog" in sys.modules:  # loaded already (by a library or a test): configure it now
        _structlog()


def _apply(structlog: Any, name: str, file: Path | None) -> None:
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _mask,
            _mask_values,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[name.lower()]),  # logging's numbers
        logger_factory=structlog.PrintLoggerFactory(file=LogFile(file) if file is not None else sys.stderr),
        cache_logger_on_first_use=True,
    )
