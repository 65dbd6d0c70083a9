"""`realmem rpc`: JSON-RPC 2.0 over stdio for the Pi adapter (contract: docs/rpc.md).

One JSON object per line.  Two threads serve requests, each in arrival order: the main
thread the quick methods (hello, path_notes, prompt_section, show, edit, ...), and a second
thread the methods in ``SLOW``, which may wait on the network or run long, with its own store
connections, so a path note never waits behind a remember.  A third, the reader, only reads
stdin: it acts on ``cancel`` at once and hands every request to its serving thread.  The
store connections and the path-note index stay warm between calls, which is what keeps the
after-every-tool-call hook fast.  Methods, their params and the function serving each come
from the command registry (``realmem.interface.registry``): a request's params are checked
against it, then the function is called with them and its result is the reply; the few
methods that need this server's state are its ``on_<name>`` methods.  A function is imported
when first called: nearly all of them reach the endpoint clients (httpx), and the child
answers ``hello`` before they load.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

from realmem import __version__, errors, frontend, logs
from realmem.app import Realmem, RealmemError
from realmem.config import Config, home_dir
from realmem.events import types as ev
from realmem.interface import registry
from realmem.logs import get_logger
from realmem.interface.entry import Entry
from realmem.write import observe

logger = get_logger("realmem.interface.rpc")


class Cancelled(RealmemError):
    pass


# Methods that may wait on the network (judge, embedder, chat) or run long (``Command.slow``) run
# on a second thread with their own store connections, so the path-note hook after every tool
# call never waits behind a remember that is waiting for the judge.
SLOW = registry.SLOW

# Path notes' counter events wait until the child has had no request for COUNT_IDLE seconds (or
# COUNT_BATCH of them wait, or another method comes): appended together, so no tool call's
# note waits behind the previous one's write, nor behind the checkpoint such writes bring on.
COUNT_IDLE = 0.02
COUNT_BATCH = 64
BACKGROUND_NICE = 10  # the `realmem scan` reading a large backlog runs at this lower CPU priority


MAX_LINE = 16 * 1024 * 1024  # one request line; anything longer is answered, not parsed


def _has_surrogate(value: Any) -> bool:
    """A lone surrogate (JSON "\\ud800") is not Unicode: it cannot be stored or written back.
    Walked with a stack, not recursion: params may nest as deep as the parser allowed.  A list
    of strings is joined and encoded at once: a path note's params hold every id shown so far,
    and one encode per id made the check a visible part of the hook."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
            continue
        if isinstance(v, list):
            try:
                v = "".join(v)
            except TypeError:  # not only strings
                stack.extend(v)
                continue
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                return True
    return False


def validate(method: str, params: dict[str, Any]) -> None:
    """Raise ParamError (code 2) when ``params`` do not match the registry's params of
    ``method`` (docs/rpc.md): a wrong type is answered before the method runs, so no method
    ever sees a list where it expects a string.  null means "not given" everywhere."""
    command = registry.COMMANDS.get(method)
    for param in (*registry.COMMON, *(command.params if command else ())):
        value = params.get(param.name)
        if value is not None and (why := param.problem(value)) is not None:
            raise errors.ParamError(f"{method}: {param.name} {why}")
    if _has_surrogate(params):
        raise errors.ParamError(f"{method}: params hold a lone surrogate, which is not valid Unicode")


class Server:
    def __init__(self, home: str | None, out: TextIO) -> None:
        self.home = home_dir(home)
        self.out = out
        self.write_lock = threading.Lock()
        self.local = threading.local()  # per-thread apps: an apsw connection per thread
        self.note_indexes: dict[str, Any] = {}
        self.resolved: dict[str, str] = {}  # cwd as a request spells it -> resolved (see ``app``)
        self.all_apps: list[dict[str, Realmem]] = []
        self.active: set[str] = set()
        self.cancelled: set[str] = set()
        self.scanner: subprocess.Popen[bytes] | None = None  # `realmem scan` reading a large backlog
        self.deferred = threading.Condition()  # guards ``pending``: replies whose writes are still running
        self.pending = 0
        self.counted: list[tuple[Realmem, ev.PathNotesShown]] = []  # main thread only: see ``count``

    # --- plumbing ------------------------------------------------------------------------

    def send(self, msg: dict[str, Any]) -> None:
        try:
            line = json.dumps(msg, ensure_ascii=False, default=str)
            line.encode("utf-8")
        except (ValueError, RecursionError):  # a lone surrogate or a pathological id: escape it
            line = json.dumps(msg, ensure_ascii=True, default=str)
        with self.write_lock:
            self.out.write(line + "\n")
            self.out.flush()

    def progress(self, token: str | None) -> Callable[[int, int, str], None]:
        def report(done: int, total: int, message: str = "") -> None:
            if token and token in self.cancelled:
                raise Cancelled("cancelled")
            if token:
                self.send({"jsonrpc": "2.0", "method": "progress",
                           "params": {"token": token, "message": message, "done": done, "total": total}})
        return report

    @property
    def entry(self) -> Entry:
        """This thread's way in: its apps stay open (warm) between requests."""
        if not hasattr(self.local, "entry"):
            self.local.entry = Entry(self.home)
            with self.write_lock:
                self.all_apps.append(self.local.entry.apps)
        return self.local.entry

    @property
    def apps(self) -> dict[str, Realmem]:
        return self.entry.apps

    def app(self, params: dict[str, Any]) -> Realmem:
        raw = params.get("cwd") or os.getcwd()
        cwd = self.resolved.get(raw)
        if cwd is None:  # resolved once per spelling: a path note's request names the same cwd each time
            if len(self.resolved) >= 64:
                self.resolved.clear()
            cwd = self.resolved[raw] = str(Path(raw).resolve())
        if cwd not in self.apps and not Path(cwd).is_dir():  # never invent a project (or its .pi/realmem) where none is
            raise errors.ParamError(f"cwd {cwd} is not an existing directory")
        # Within a request (``handle``) the app is the one its end follows; outside one it is opened only.
        opener = getattr(self.local, "request", None) or self.entry
        return opener.app(cwd, session=params.get("session"))

    def later(self, write: Callable[[], None]) -> None:
        """Run ``write`` once this request's reply is sent (e.g. recall's hit: the agent does
        not wait for it)."""
        if not hasattr(self.local, "later"):
            self.local.later = []
        self.local.later.append(write)

    def count(self, app: Realmem, event: ev.PathNotesShown) -> None:
        """Keep a path note's counter event for ``append_counted`` (main thread only)."""
        self.counted.append((app, event))
        if len(self.counted) >= COUNT_BATCH:
            self.later(self.append_counted)

    def append_counted(self) -> None:
        """Append the counter events ``count`` kept, one transaction per project.  The serving
        loop calls it when idle and before any request but a path note, so whatever is asked
        next sees those counts; only the main thread, whose connections the apps are."""
        if not self.counted:
            return
        by_app: dict[int, tuple[Realmem, list[ev.Event]]] = {}
        for app, event in self.counted:
            by_app.setdefault(id(app), (app, []))[1].append(event)
        self.counted = []
        for app, events in by_app.values():
            try:
                app.emit(events)
            except Exception:  # the notes are long answered: log, and keep serving
                logger.exception("rpc path-note counters failed", events=len(events))

    def _hold(self) -> None:
        """Before a reply goes out: requests the client sends after it wait for its writes."""
        if getattr(self.local, "later", None):
            with self.deferred:
                self.pending += 1
                self.deferred.notify_all()  # every change of ``pending`` is announced
            self.local.held = True

    def _settle(self) -> None:
        """Wait for the writes of replies already sent (by another thread): a request sent
        after a recall's answer sees its hit, e.g. a list shows the use count it added."""
        with self.deferred:
            self.deferred.wait_for(lambda: self.pending == 0)

    def after(self) -> None:
        """After the reply: the writes deferred past it (the request's end then follows the
        log, queueing the background work its events call for)."""
        writes, self.local.later = getattr(self.local, "later", None) or [], []
        try:
            for write in writes:
                try:
                    write()
                except Exception:  # the answer is out: log, and keep serving
                    logger.exception("rpc write after the reply failed")
        finally:
            if getattr(self.local, "held", False):
                self.local.held = False
                with self.deferred:
                    self.pending -= 1
                    self.deferred.notify_all()
            self.local.request = None  # what the thread opens now is no longer this request's

    def handle(self, msg: dict[str, Any]) -> None:
        mid = msg.get("id")
        method = msg.get("method")
        params = msg.get("params") or {}
        if not _valid_id(mid):
            self.send({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "invalid request: bad id"}})
            return
        if not isinstance(method, str):  # not a request at all: answered even without an id
            self.send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32600, "message": "invalid request: no method"}})
            return
        if not isinstance(params, dict):
            if mid is not None:
                self.send({"jsonrpc": "2.0", "id": mid,
                           "error": {"code": -32600, "message": "invalid request: params must be an object"}})
            return
        command = registry.COMMANDS.get(method)
        if command is None:
            if mid is not None:
                self.send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": f"unknown method {method}"}})
            return
        with self.entry.request() as request:
            self.local.request = request
            try:
                validate(method, params)
                self._settle()
                result = self.call(command, params)
            except Exception as exc:  # a bug must not kill the child either: Pi keeps working
                exc = self.entry.fault(exc)  # a read-only, full or damaged REALMEM_HOME: a refusal naming the file
                code = errors.code_of(exc)
                if code == errors.USAGE:
                    logger.warning("rpc usage error", method=method, error=str(exc))
                elif code == errors.INTERNAL:
                    traceback.print_exc(file=sys.stderr)
                err = {"code": code, "message": errors.message_of(exc, method)}
            else:
                self._hold()
                try:
                    if mid is not None:
                        self.send({"jsonrpc": "2.0", "id": mid, "result": result})
                finally:  # a reply that failed to go out still releases the requests waiting on it
                    self.after()
                return
            finally:
                token = params.get("progress_token")
                if isinstance(token, str) and token:
                    with self.write_lock:
                        self.active.discard(token)
                        self.cancelled.discard(token)
            self._hold()
            try:
                if mid is not None:
                    self.send({"jsonrpc": "2.0", "id": mid, "error": err})
            finally:
                self.after()

    # --- methods -------------------------------------------------------------------------

    def call(self, command: registry.Command, p: dict[str, Any]) -> Any:
        """The answer to ``command``: its handler's, shaped as the registry says, or this
        server's own ``on_<name>`` for the methods that need its state."""
        own = getattr(self, f"on_{command.name}", None)
        if own is not None:
            return own(command.arguments(p), p)
        kwargs = command.arguments(p)
        if command.later:
            kwargs["later"] = self.later
        if command.progress:
            kwargs["progress"] = self.progress(p.get("progress_token"))
        target = Config(self.home) if command.on == "config" else self.app(p)
        return command.shape(command.function()(target, **kwargs))

    def on_hello(self, a: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
        cfg = Config(self.home)
        return {"version": __version__, "home": str(self.home), "pid": os.getpid(),
                "hidden_tools": list(cfg["hiddenTools"]),
                "path_notes": {k: cfg[f"pathNotes.{k}"] for k in ("maxFull", "maxCaptions", "charBudget")}}

    def on_session_start(self, a: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
        from realmem.interface import session  # lazy: start-up
        from realmem.read import freshness  # lazy: start-up
        app = self.app(p)
        pending = observe.backlog(app)
        if pending > observe.SYNC_FILES:
            self._observe_in_background(app)
        elif pending:
            observe.scan_stores(app)
        freshness.warm(app, background=True)  # git is read off this thread; path notes never wait
        res = session.start(app)
        if pending > observe.SYNC_FILES:
            note = f"realmem: reading {pending} new or changed fact files in the background."
            res["notification"] = note if res["notification"] is None else f"{res['notification']} {note[9:]}"
        res["observing"] = pending if pending > observe.SYNC_FILES else 0
        return res

    def _observe_in_background(self, app: Realmem) -> None:
        """A large backlog of fact files, read by `realmem scan` in its own process: a thread
        here would hold the GIL and slow every answer.  A crash mid-way keeps the batches the
        scan committed (``observe.EMIT_BATCH``), and the next session start reads the rest again."""
        if self.scanner is not None and self.scanner.poll() is None:
            return  # one is still reading
        self.scanner = subprocess.Popen(
            [sys.executable, "-m", "realmem.interface.cli", "--home", str(self.home), "--cwd", str(app.cwd), "scan"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with contextlib.suppress(OSError):  # it yields the CPU to this child's answers (the prompt waits on them)
            os.setpriority(os.PRIO_PROCESS, self.scanner.pid, BACKGROUND_NICE)

    def on_prompt_section(self, a: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
        from realmem.read import prompt  # lazy: start-up
        return {"text": prompt.section(self.app(p))}

    def on_strip_context_files(self, a: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
        from realmem.read import prompt  # lazy: start-up
        text, stripped = prompt.strip_context_files(self.app(p), a["system_prompt"], a["context_files"], only=a["only"])
        return {"system_prompt": text, "stripped": stripped}

    def on_path_notes(self, a: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
        from realmem.read import pathnotes  # lazy: start-up
        if a["tool_name"].startswith("realmem_"):
            return {"text": None, "shown": [], "touched": []}  # realmem's own tools: no notes about itself
        app = self.app(p)
        idx = self.note_indexes.setdefault(str(app.cwd), pathnotes.NoteIndex())
        notes = pathnotes.path_notes(app, idx, tool_name=a["tool_name"], tool_input=a["input"], shown=a["shown"],
                                     counter=lambda e: self.count(app, e))
        return pathnotes.dumps(notes)

    def on_settings_set(self, a: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
        from realmem.interface import settings  # lazy: start-up
        saved = settings.save(Config(self.home), a["key"], a["value"])
        for apps in self.all_apps:  # every thread's open projects see the new value at once
            for app in apps.values():
                app.config.reload()
        return {"text": saved["text"]}


def _valid_id(mid: Any) -> bool:
    """JSON-RPC ids are strings, numbers or null."""
    return mid is None or (isinstance(mid, (str, int, float)) and not isinstance(mid, bool))


def _lines(stdin: TextIO) -> Iterator[str | None]:
    """Request lines, each at most MAX_LINE characters read into memory; None stands for a
    longer line, whose rest is skipped."""
    while True:
        line = stdin.readline(MAX_LINE + 1)
        if not line:
            return
        if len(line) > MAX_LINE and not line.endswith("\n"):
            while (rest := stdin.readline(MAX_LINE)) and not rest.endswith("\n"):
                pass
            yield None
            continue
        yield line


class Loop:
    """The child's threads around one Server: the reader takes stdin's lines (acting on
    ``cancel`` at once), the main thread serves the quick methods and appends the path notes'
    counters when idle, the slow thread serves ``SLOW`` in order."""

    def __init__(self, server: Server, stdin: TextIO) -> None:
        self.server = server
        self.stdin = stdin
        self.inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.slow: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.slow_thread = threading.Thread(target=self.slow_loop, daemon=True, name="rpc-slow")

    def run(self) -> int:
        """Serve until stdin closes, then finish what was asked and close every app."""
        threading.Thread(target=self.reader, daemon=True, name="rpc-reader").start()
        self.slow_thread.start()
        while True:
            try:
                msg = self.inbox.get(timeout=COUNT_IDLE) if self.server.counted else self.inbox.get()
            except queue.Empty:
                self.server.append_counted()
                continue
            if msg is None:
                break
            self.route(msg)
        self.close()
        return 0

    def route(self, msg: dict[str, Any]) -> None:
        """Serve ``msg`` here, or hand it to the slow thread."""
        if msg.get("method") != "path_notes":
            self.server.append_counted()
        token = msg["params"].get("progress_token") if isinstance(msg.get("params"), dict) else None
        if isinstance(token, str) and token:
            with self.server.write_lock:
                self.server.active.add(token)
        method = msg.get("method")
        if isinstance(method, str) and method in SLOW:
            self.slow.put(msg)
        else:
            self.serve_one(msg)

    def serve_one(self, msg: dict[str, Any]) -> None:
        try:
            self.server.handle(msg)
        except Exception:  # never lose a serving thread: later requests must still be answered
            logger.exception("rpc request failed", method=str(msg.get("method"))[:80])

    def slow_loop(self) -> None:
        while (msg := self.slow.get()) is not None:
            self.serve_one(msg)

    def reader(self) -> None:
        try:
            for line in _lines(self.stdin):
                try:
                    self.read_one(line)
                except Exception:  # the reader must outlive any line: it is the child's only ear
                    logger.exception("rpc reader failed on a line")
        except Exception:  # stdin itself broke (undecodable bytes are replaced, so this is rare)
            logger.exception("rpc stdin failed")
        self.inbox.put(None)

    def read_one(self, line: str | None) -> None:
        if line is None:
            self.parse_error(f"request line longer than {MAX_LINE} characters")
            return
        line = line.strip()
        if not line:
            return
        try:
            msg = json.loads(line)
        except (ValueError, RecursionError):  # RecursionError: nesting deeper than Python's stack
            self.parse_error("parse error")
            return
        if isinstance(msg, dict) and msg.get("method") == "cancel" and isinstance(msg.get("params"), dict):
            token = msg["params"].get("token")
            if isinstance(token, str):
                with self.server.write_lock:
                    if token in self.server.active:  # a late cancel for a finished request is dropped
                        self.server.cancelled.add(token)
            return
        self.inbox.put(msg if isinstance(msg, dict) else {})

    def parse_error(self, message: str) -> None:
        self.server.send({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": message}})

    def close(self) -> None:
        """Append what still waits, let the slow thread finish, then close every app."""
        server = self.server
        server.append_counted()
        self.slow.put(None)
        self.slow_thread.join(timeout=60)
        if server.scanner is not None:  # leave no process behind: a scan of thousands takes seconds, not minutes
            try:
                server.scanner.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pass
        for apps in server.all_apps:
            for app in apps.values():
                app.close()


def serve(home: str | None = None, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    logs.configure()
    frontend.use(frontend.PI)  # this child serves Pi only: hints name its /realmem commands
    if stdin is None:
        # Undecodable bytes become U+FFFD: one bad byte must not end the reader thread.
        sys.stdin.reconfigure(errors="replace")
        stdin = sys.stdin
    return Loop(Server(home, stdout or sys.stdout), stdin).run()
