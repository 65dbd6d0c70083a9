"""Endpoint failures split by what the caller should do next.

``EndpointUnavailable`` means "try again later" (the remember path queues the candidate);
``EndpointError`` means "retrying will not help until something changes" (a bad key, a bad
model name, a malformed request or answer).
"""

from __future__ import annotations

from realmem.errors import Error


class EndpointUnavailable(Error):
    """The endpoint could not answer now: refused, timed out, 5xx, 429 or 503 while loading."""

    def __init__(self, message: str, *, url: str = "", status: int | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.url = url
        self.status = status
        self.retry_after = retry_after


class EndpointError(Error):
    """The endpoint refused the request, or answered something unusable."""

    def __init__(self, message: str, *, url: str = "", status: int | None = None) -> None:
        super().__init__(message)
        self.url = url
        self.status = status


class NotConfigured(EndpointError):
    """No URL is set for this endpoint, so nothing can be sent."""


class RequestTooLarge(EndpointError):
    """422 because the request holds too many questions or options; split it and retry."""
