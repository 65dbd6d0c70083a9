"""Run fake endpoints by hand or from another process's tests.

    python -m realmem.fakes --semif --embeddings --chat [--port N] [--key K] [--no-heuristic]
    python -m realmem.fakes --gemini --responses      # model APIs for Gemini CLI and Codex

Prints one ``<kind> <base url>`` line per server, then ``ready``, on standard output (logs
go to standard error) and serves until SIGTERM or SIGINT (or, with ``--watch-stdin``, until
standard input closes).  With ``--port N`` the servers take N, N+1, N+2, ...  With no kind
named it serves System One, embeddings and chat.
Script them over HTTP: ``POST <url>/_control/script`` (see ``realmem.fakes.base``).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from types import FrameType

import structlog

from realmem.fakes.base import FakeServer
from realmem.fakes.chat import FakeChat
from realmem.fakes.embeddings import FakeEmbeddings
from realmem.fakes.gemini import FakeGemini
from realmem.fakes.responses import FakeResponses
from realmem.fakes.systemone import FakeSystemOne

KINDS = ("semif", "embeddings", "chat", "gemini", "responses")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m realmem.fakes", description="Run realmem's fake endpoints.")
    parser.add_argument("--semif", action="store_true", help="System One judge")
    parser.add_argument("--embeddings", action="store_true", help="OpenAI-compatible embeddings")
    parser.add_argument("--chat", action="store_true", help="OpenAI-compatible chat completions")
    parser.add_argument("--gemini", action="store_true", help="Gemini API, for Gemini CLI (GOOGLE_GEMINI_BASE_URL)")
    parser.add_argument("--responses", action="store_true", help="OpenAI Responses API, for Codex (base_url + /v1)")
    parser.add_argument("--port", type=int, default=0, help="first port (default: random free ports)")
    parser.add_argument("--key", default="", help="require this bearer key")
    parser.add_argument("--heuristic", action=argparse.BooleanOptionalAction, default=True,
                        help="answer unscripted requests heuristically (default) or refuse them")
    parser.add_argument("--max-questions", type=int, default=64, help="System One questions per request")
    parser.add_argument("--max-options", type=int, default=16, help="System One options per choice")
    parser.add_argument("--dims", type=int, default=64, help="embedding dimensions")
    parser.add_argument("--watch-stdin", action="store_true",
                        help="also exit when standard input closes (for a parent process)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr),
                        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    kinds = [k for k in KINDS if getattr(args, k)] or ["semif", "embeddings", "chat"]
    servers: list[FakeServer] = []
    for offset, kind in enumerate(kinds):
        port = args.port + offset if args.port else 0
        if kind == "semif":
            servers.append(FakeSystemOne(port=port, key=args.key, heuristic=args.heuristic,
                                         max_questions=args.max_questions, max_options=args.max_options))
        elif kind == "embeddings":
            servers.append(FakeEmbeddings(port=port, key=args.key, dims=args.dims))
        elif kind == "chat":
            servers.append(FakeChat(port=port, key=args.key, heuristic=args.heuristic))
        else:  # the agent model APIs: scripted turns only (POST /_control/script)
            servers.append((FakeGemini if kind == "gemini" else FakeResponses)(port=port, key=args.key))
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        for server in servers:
            server.start()
            print(f"{server.kind} {server.url}", flush=True)
        print("ready", flush=True)
        if args.watch_stdin:
            def until_eof() -> None:
                sys.stdin.read()
                stop.set()

            threading.Thread(target=until_eof, daemon=True).start()
        while not stop.wait(1.0):
            pass
    finally:
        for server in servers:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
