"""A scriptable HTTP server on 127.0.0.1 that tests and developers point realmem's clients at.

Each fake is a real ``ThreadingHTTPServer`` in a background thread.  Besides its API routes
every fake serves control routes, so a fake started in another process
(``python -m realmem.fakes``) can be scripted over HTTP exactly like one in-process:

``POST /_control/script``     the subclass's ``script()`` payload as JSON
``POST /_control/fail``       ``{"status", "n", "retry_after", "detail"}`` -> ``fail_next``
``POST /_control/configure``  keyword settings -> ``configure`` (e.g. ``{"models": [...]}``)
``POST /_control/reset``      forget scripts, injected failures and recorded requests
``GET  /_control/requests``   ``{"requests": [{"path", "body", "headers"}]}``

Control routes are never recorded, failed, authenticated or counted.  Responses use HTTP/1.0
(one connection per request) so ``down()`` really refuses the next request.
"""

from __future__ import annotations

import json
import sys
import threading
from abc import ABC, abstractmethod
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, NamedTuple, Self

from realmem.logs import get_logger

log = get_logger(__name__)

HOST = "127.0.0.1"


class RecordedRequest(NamedTuple):
    """One API request as received; unpacks as ``(path, body, headers)``."""

    path: str
    body: Any
    headers: dict[str, str]


class Reply(NamedTuple):
    status: int
    body: Any
    headers: tuple[tuple[str, str], ...] = ()


class Stream(NamedTuple):
    """A ``text/event-stream`` reply body: ``(event name or None, JSON data)`` per event.  The
    model APIs that coding agents speak stream their answers this way; with HTTP/1.0 the end of
    the stream is the end of the connection."""

    events: list[tuple[str | None, Any]]


class ScriptError(ValueError):
    """A script the fake cannot follow; answered as 400 so the test sees why."""


class _Failure(NamedTuple):
    status: int
    retry_after: float | None
    detail: str | None


_DEFAULT_DETAIL = {
    401: "invalid API key",
    422: "request too large: too many questions",
    429: "rate limited",
    503: "model is loading",
}


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    protocol_version = "HTTP/1.0"

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def _dispatch(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body: Any = None
        reply: Reply | None = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                reply = Reply(400, {"detail": "request body is not valid JSON"})
        if reply is None:
            headers = {k.lower(): v for k, v in self.headers.items()}
            reply = self.server.fake.dispatch(method, self.path, body, headers)
        if isinstance(reply.body, Stream):
            payload = b"".join(_event(name, data) for name, data in reply.body.events)
            kind = "text/event-stream"
        else:
            payload = json.dumps(reply.body).encode("utf-8")
            kind = "application/json"
        self.send_response(reply.status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(payload)))
        for name, value in reply.headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        """Silenced: request lines would clutter test output (and headers are never logged)."""


def _event(name: str | None, data: Any) -> bytes:
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode("utf-8")


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    fake: FakeServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (a timeout test) is routine; anything else is logged, not printed."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        log.exception("fake.connection_failed", kind=self.fake.kind)


class FakeServer(ABC):
    """Base of the fakes: lifecycle, request log, failure injection, bearer check, control routes."""

    kind = "fake"

    def __init__(self, *, key: str = "", port: int = 0) -> None:
        self.key = key
        self.port = port
        self.requests: list[RecordedRequest] = []
        self._failures: deque[_Failure] = deque()
        self._lock = threading.RLock()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """Base URL without /v1."""
        if not self.port:
            raise RuntimeError("the fake server has not been started")
        return f"http://{HOST}:{self.port}"

    def start(self) -> Self:
        self._serve()
        return self

    def stop(self) -> None:
        self._close()

    def down(self) -> None:
        """Close the listening socket: clients get connection refused until ``up()``."""
        self._close()

    def up(self) -> None:
        """Listen again on the same port."""
        if self._httpd is None:
            self._serve()

    @property
    def running(self) -> bool:
        return self._httpd is not None

    def _serve(self) -> None:
        if self._httpd is not None:
            return
        httpd = _HTTPServer((HOST, self.port), _Handler)
        httpd.fake = self
        self.port = httpd.server_address[1]
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"fake-{self.kind}-{self.port}", daemon=True)
        self._thread.start()
        log.debug("fake.listening", kind=self.kind, url=self.url)

    def _close(self) -> None:
        httpd, thread = self._httpd, self._thread
        self._httpd = self._thread = None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if thread is not None:
            thread.join()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- scripting ---------------------------------------------------------------------------

    def fail_next(self, status: int, n: int = 1, retry_after: float | None = None,
                  detail: str | None = None) -> None:
        """Answer the next ``n`` API requests with ``status`` (e.g. 401, 422, 503)."""
        with self._lock:
            for _ in range(n):
                self._failures.append(_Failure(status, retry_after, detail))

    def configure(self, **settings: Any) -> None:
        """Change settings named by attributes listed in ``settable``."""
        with self._lock:
            for name, value in settings.items():
                if name not in self.settable():
                    raise ScriptError(f"{self.kind} fake has no setting {name!r}")
                setattr(self, name, value)

    def settable(self) -> set[str]:
        return {"key"}

    @abstractmethod
    def script(self, payload: Any) -> None:
        """Add scripted answers; the JSON form of ``payload`` is also what /_control/script takes."""

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self._failures.clear()
            self._reset_script()

    @abstractmethod
    def _reset_script(self) -> None:
        """Drop every scripted answer."""

    # -- dispatch ----------------------------------------------------------------------------

    def dispatch(self, method: str, path: str, body: Any, headers: dict[str, str]) -> Reply:
        """Route one request (called from the handler thread)."""
        path = path.split("?", 1)[0]
        try:
            if path.startswith("/_control/"):
                return self._control(method, path, body)
            with self._lock:
                self.requests.append(RecordedRequest(path, body, headers))
                failure = self._failures.popleft() if self._failures else None
            if failure is not None:
                extra = (("Retry-After", f"{failure.retry_after:g}"),) if failure.retry_after is not None else ()
                detail = failure.detail or _DEFAULT_DETAIL.get(failure.status, "injected failure")
                return Reply(failure.status, {"detail": detail}, extra)
            if self.key and headers.get("authorization") != f"Bearer {self.key}":
                return Reply(401, {"detail": "invalid API key"})
            return self.handle(method, path, body)
        except ScriptError as exc:
            return Reply(400, {"detail": f"fake {self.kind}: {exc}"})
        except Exception as exc:  # a fake bug must answer, not hang the client
            log.exception("fake.crashed", kind=self.kind, path=path)
            return Reply(500, {"detail": f"fake {self.kind} crashed: {type(exc).__name__}: {exc}"})

    @abstractmethod
    def handle(self, method: str, path: str, body: Any) -> Reply:
        """Answer an authenticated API request."""

    def _control(self, method: str, path: str, body: Any) -> Reply:
        if method == "GET" and path == "/_control/requests":
            with self._lock:
                return Reply(200, {"requests": [r._asdict() for r in self.requests]})
        if method != "POST":
            return Reply(405, {"detail": "control routes take POST"})
        if path == "/_control/script":
            self.script(body)
        elif path == "/_control/fail":
            if not isinstance(body, dict) or "status" not in body:
                raise ScriptError("fail needs {\"status\": ...}")
            self.fail_next(int(body["status"]), int(body.get("n", 1)), body.get("retry_after"),
                           body.get("detail"))
        elif path == "/_control/configure":
            if not isinstance(body, dict):
                raise ScriptError("configure needs a JSON object")
            self.configure(**body)
        elif path == "/_control/reset":
            self.reset()
        else:
            return Reply(404, {"detail": f"no control route {path}"})
        return Reply(200, {"ok": True})


def not_found(path: str) -> Reply:
    return Reply(404, {"detail": f"no route {path}"})
