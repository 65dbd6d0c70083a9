"""A System One judge script: a candidate's state (caption, content, neighbours) and one question
of each answer type (choice, score, noul) about it."""

from __future__ import annotations

from realmem.clients import Question

STATE = """Caption: Run e2e tests with pnpm test:e2e
Content: `pnpm test:e2e` needs Docker running; it starts Postgres via docker compose.
Neighbours:
[AZJrPlwafS-aSxwtPk9aaw] Run e2e tests with pnpm test:e2e — `pnpm test:e2e` needs Docker running;
  it starts Postgres via docker compose.
[AZJrPmEw1-8Vr0xkmp2Bqw] Lint before pushing - run `pnpm lint` and fix every warning
"""

QUESTIONS = {
    "covered_by": Question("choice", "Which memory already says this?",
                           {"AZJrPlwafS-aSxwtPk9aaw": "first", "AZJrPmEw1-8Vr0xkmp2Bqw": "second",
                            "none": "no memory covers it"}),
    "importance": Question("score", "How bad is forgetting it?", ["trivial", "minor", "useful", "major", "broken"]),
    "durable": Question("noul", "Is this a lasting fact?", {"true": "lasting", "false": "task status"}),
}
