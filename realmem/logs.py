"""structlog setup: JSON lines on stderr (stdout belongs to rpc and --json output).

Secrets never reach a log line: the clients log URLs and statuses only, and this processor
masks any value under a key that looks like a credential, as a last line of defence.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import structlog

_SECRET_KEYS = ("key", "token", "secret", "password", "authorization", "api_key", "apikey")


def _mask(_: Any, __: str, event: dict[str, Any]) -> dict[str, Any]:
    for k in list(event):
        if any(s in k.lower() for s in _SECRET_KEYS) and k != "event":
            event[k] = "****"
    return event


def configure(level: str | None = None) -> None:
    name = (level or os.environ.get("REALMEM_LOG") or "warning").upper()
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _mask,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, name, logging.WARNING)),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
