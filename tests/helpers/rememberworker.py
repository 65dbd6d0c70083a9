"""Helper process for tests/jobs/test_worker.py: remember facts through the real remember path.

    python tests/helpers/rememberworker.py HOME CWD CAPTION::CONTENT [CAPTION::CONTENT ...]

Prints one JSON line per fact: {"action", "id", "queued"}.  Endpoints come from the
environment (REALMEM_SEMIF_URL, ...), exactly as for a Pi process.
"""

from __future__ import annotations

import json
import sys

from realmem import logs
from realmem.jobs import policy
from realmem.gate.remember import remember
from realmem.write.attached import open_attached


def main(argv: list[str]) -> int:
    logs.configure()
    home, cwd, facts = argv[0], argv[1], argv[2:]
    app = open_attached(home, cwd)
    try:
        for fact in facts:
            caption, _, content = fact.partition("::")
            out = remember(app, caption, content)
            policy.follow_app(app)  # as every front end does after a command: queue and start the worker
            print(json.dumps({"action": out.action, "id": out.memory.id if out.memory else None,
                              "queued": out.queued}), flush=True)
    finally:
        app.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
