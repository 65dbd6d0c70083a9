"""One HTTP transport for the three endpoints, so every client maps failures the same way.

Status mapping (the caller's next step decides the class, see ``errors``):
connection refused / timeout / 5xx / 429 -> ``EndpointUnavailable`` (with ``retry_after`` when
the server sends ``Retry-After``); 401 -> ``EndpointError("authentication failed (401) for
<url>: <key_advice>")``, naming the key setting to fix; 422 saying too many questions/options -> ``RequestTooLarge``; other 4xx ->
``EndpointError``.  Keys travel only in the Authorization header, which is never logged and
never part of a message.
"""

from __future__ import annotations

import email.utils
import os
import re
import threading
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from realmem.clients.errors import EndpointError, EndpointUnavailable, NotConfigured, RequestTooLarge
from realmem.frontend import set_in
from realmem.logs import get_logger

if TYPE_CHECKING:
    import ssl  # only for annotations: httpx itself imports ssl when a context is built

log = get_logger(__name__)

# A 422 whose detail matches this is about size, which splitting the request can fix.
_TOO_LARGE = re.compile(r"too (many|large|long)|exceed|maximum|limit", re.IGNORECASE)


_ssl_lock = threading.Lock()
_ssl_contexts: dict[tuple[str, str], ssl.SSLContext] = {}


def shared_ssl_context() -> ssl.SSLContext:
    """The process's one verifying SSL context, built on first https use.

    Building one loads the CA bundle, which a new httpx.Client per remember would
    pay every time.  httpx.create_ssl_context keeps httpx's own rules (SSL_CERT_FILE /
    SSL_CERT_DIR, else certifi); those variables are part of the key so a changed
    environment still gets a matching context.
    """
    env = (os.environ.get("SSL_CERT_FILE", ""), os.environ.get("SSL_CERT_DIR", ""))
    with _ssl_lock:
        ctx = _ssl_contexts.get(env)
        if ctx is None:
            ctx = _ssl_contexts[env] = httpx.create_ssl_context()
        return ctx


def normalize_base_url(url: str) -> str:
    """Base URL without a trailing slash or ``/v1``: users paste either form."""
    url = (url or "").strip().rstrip("/")
    if url.endswith("/v1"):
        url = url[:-3].rstrip("/")
    return url


def display_url(url: str) -> str:
    """The URL without user:password and query string, safe for messages and logs."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def parse_retry_after(value: str | None) -> float | None:
    """Retry-After as seconds (delta-seconds or an HTTP date); None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def error_detail(response: httpx.Response) -> str:
    """The server's explanation from the usual error shapes ({"detail"}, {"error"}, text)."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:500]
    if isinstance(body, dict):
        for field in ("detail", "error", "message"):
            value = body.get(field)
            if isinstance(value, str):
                return value
            if isinstance(value, dict) and isinstance(value.get("message"), str):
                return str(value["message"])
            if isinstance(value, list):  # FastAPI validation errors
                return "; ".join(str(v.get("msg", v)) if isinstance(v, dict) else str(v) for v in value)
    return str(body)[:500]


class Endpoint:
    """A base URL plus bearer key and timeout; sends JSON requests and maps failures."""

    def __init__(self, name: str, url: str, key: str, timeout: float, key_advice: str = "",
                 setting: str | None = None) -> None:
        self.name = name
        self.setting = setting  # the config key of the URL, named when it is not set
        self.key_advice = key_advice or f"check the {name} key"  # for a 401: which setting to fix
        self.url = normalize_base_url(url)
        self.timeout = float(timeout)
        self._key = key or ""
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()

    @property
    def configured(self) -> bool:
        return bool(self.url)

    def _http(self) -> httpx.Client:
        """The pooled connection, created on first use so unused clients cost nothing."""
        with self._lock:
            if self._client is None:
                headers = {"Accept": "application/json"}
                if self._key:
                    headers["Authorization"] = f"Bearer {self._key}"
                # A plain http:// endpoint needs no TLS: verify=None makes httpx pass no context
                # on (it builds one only for verify=True/False), and requests never leave this
                # URL (redirects are not followed).
                https = urlsplit(self.url).scheme == "https"
                self._client = httpx.Client(headers=headers, timeout=httpx.Timeout(self.timeout),
                                            verify=shared_ssl_context() if https else None)  # type: ignore[arg-type]
            return self._client

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return self.request("POST", path, body)

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """Send one request and return the decoded JSON body, or raise the mapped error."""
        if not self.url:
            raise NotConfigured(f"the {self.name} endpoint is not configured; set it {set_in(self.setting)}")
        full = self.url + path
        shown = display_url(full)
        started = time.monotonic()
        try:
            response = self._http().request(method, full, json=body, timeout=httpx.Timeout(self.timeout))
        except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
            # A configuration mistake (e.g. no http://): retrying later cannot fix it.
            raise EndpointError(f"the {self.name} URL is invalid ({exc}): {shown}; "
                                "use http(s)://host:port without /v1", url=shown) from exc
        except httpx.TimeoutException as exc:
            log.warning("endpoint.unavailable", endpoint=self.name, url=shown, reason="timeout")
            raise EndpointUnavailable(f"{self.name} endpoint timed out after {self.timeout:g}s: {shown}",
                                      url=shown) from exc
        except httpx.TransportError as exc:
            log.warning("endpoint.unavailable", endpoint=self.name, url=shown, reason=type(exc).__name__)
            raise EndpointUnavailable(f"{self.name} endpoint unreachable ({type(exc).__name__}): {shown}",
                                      url=shown) from exc
        elapsed_ms = round((time.monotonic() - started) * 1000, 1)
        status = response.status_code
        if status >= 400:
            raise self._failure(response, shown)
        log.debug("endpoint.request", endpoint=self.name, method=method, url=shown, status=status,
                  elapsed_ms=elapsed_ms)
        try:
            return response.json()
        except ValueError as exc:
            raise EndpointError(f"{self.name} endpoint returned invalid JSON ({status}) for {shown}",
                                url=shown, status=status) from exc

    def _failure(self, response: httpx.Response, shown: str) -> Exception:
        status = response.status_code
        detail = error_detail(response)
        if status >= 500 or status == 429:
            retry_after = parse_retry_after(response.headers.get("retry-after"))
            log.warning("endpoint.unavailable", endpoint=self.name, url=shown, status=status,
                        retry_after=retry_after)
            suffix = f"; retry after {retry_after:g}s" if retry_after is not None else ""
            return EndpointUnavailable(f"{self.name} endpoint unavailable ({status}) for {shown}{suffix}",
                                       url=shown, status=status, retry_after=retry_after)
        log.warning("endpoint.error", endpoint=self.name, url=shown, status=status, detail=detail)
        if status == 401:
            return EndpointError(f"authentication failed (401) for {shown}: {self.key_advice}",
                                 url=shown, status=status)
        if status == 422 and _TOO_LARGE.search(detail):
            return RequestTooLarge(f"request too large (422) for {shown}: {detail}", url=shown, status=status)
        what = "invalid request" if status == 422 else "request refused"
        return EndpointError(f"{what} ({status}) for {shown}: {detail}", url=shown, status=status)
