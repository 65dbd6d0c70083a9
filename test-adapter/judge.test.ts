/**
 * The first session of a new user: no System One endpoint, so the core asks Pi's own model
 * (through the model bridge) the judge's question set. The faux model answers the judge's
 * JSON, picking options from the request it was shown, as a real model would.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import type { Context } from "@earendil-works/pi-ai";
import { createEnv, openPi, type PiHarness, REAL_CORE, type TestEnv, toolResultTexts } from "./harness.js";

type Asked = Record<string, { question: string; options: Record<string, string> }>;

/** The question set in the judge's request (the user message after "QUESTIONS"). */
function asked(context: Context): Asked {
	const last = context.messages.at(-1);
	assert.ok(last && last.role === "user", "the judge's request ends with its user message");
	const text = typeof last.content === "string" ? last.content : last.content.map((c) => ("text" in c ? c.text : "")).join("");
	const at = text.indexOf("QUESTIONS\n");
	assert.ok(at >= 0, `not a judge request: ${text.slice(0, 200)}`);
	return JSON.parse(text.slice(at + "QUESTIONS\n".length)) as Asked;
}

/** The first option of a pick question that names a neighbour (not "none"). */
const neighbour = (q: Asked[string]) => {
	const id = Object.keys(q.options).find((k) => k !== "none");
	assert.ok(id, "the judge was shown a neighbour");
	return id;
};

/** A judge's answer: certainty on one option per question, chosen by `pick` or the defaults
 * of a new, useful, durable, safe, shared fact. */
function judgeAnswer(picks: Record<string, (q: Asked[string]) => string> = {}) {
	return (context: Context): string => {
		const defaults: Record<string, string> = { action: "add", importance: "3", durable: "true", unsafe: "false", scope: "shared", path_urgency: "1" };
		const answers: Record<string, { probabilities: Record<string, number> }> = {};
		for (const [name, q] of Object.entries(asked(context))) {
			const base = name.replace(/_\d+$/, ""); // a sharded pick (covered_by_1) answers like its base
			const chosen = picks[base]?.(q) ?? defaults[base] ?? "none";
			assert.ok(chosen in q.options, `${chosen} is an option of ${name}`);
			answers[name] = { probabilities: Object.fromEntries(Object.keys(q.options).map((k) => [k, k === chosen ? 1 : 0])) };
		}
		return JSON.stringify({ answers });
	};
}

describe("remember in the first session, judged by Pi's own model", { skip: !existsSync(REAL_CORE) && `${REAL_CORE} is not installed` }, () => {
	let env: TestEnv;
	let pi: PiHarness | undefined;
	const savedBin = process.env.REALMEM_BIN;

	before(async () => {
		delete process.env.REALMEM_BIN;
		env = await createEnv();
		delete process.env.REALMEM_JUDGE_FALLBACK; // the default: judge with the chat model
		// A queued candidate's retry would ask the faux model too and take a scripted answer.
		process.env.REALMEM_QUEUE_BASEBACKOFFSECONDS = "900"; // the most queue.maxBackoffSeconds allows
	});
	after(async () => {
		await pi?.close();
		if (savedBin !== undefined) process.env.REALMEM_BIN = savedBin;
		delete process.env.REALMEM_QUEUE_BASEBACKOFFSECONDS;
		await env.cleanup();
	});

	const realmem = (...args: string[]) => execFileSync(REAL_CORE, ["--cwd", env.cwd, ...args], { encoding: "utf8" });

	/** One turn: the model calls realmem_remember, then each scripted bridge answer follows. */
	async function remember(caption: string, content: string, ...bridged: Array<(context: Context) => string>): Promise<string> {
		assert.ok(pi);
		pi.script(["realmem_remember", { caption, content }], ...bridged, "Done.");
		await pi.session.prompt(`Remember that ${caption}.`);
		const result = toolResultTexts(pi.contexts.at(-1)).at(-1);
		assert.ok(result, "the remember tool answered");
		return result;
	}

	async function facts(): Promise<string[]> {
		const store = join(env.cwd, ".pi", "realmem");
		const files = (await readdir(store)).filter((f) => f.endsWith(".md"));
		return Promise.all(files.map((f) => readFile(join(store, f), "utf8")));
	}

	test("stores an Add, reinforces a duplicate and edits a conflict, with no System One set", async () => {
		pi = await openPi(env);
		const added = await remember("Deploys run with make ship", "Run `make ship` from the repo root to deploy the site.", judgeAnswer());
		assert.match(added, /^Stored \[[\w-]+\] Deploys run with make ship \(shared\)\./);
		// The judge's request went to Pi's model: its system prompt is the judge's, its reply was parsed.
		assert.ok(pi.systemPrompts.some((p) => p.startsWith("You judge candidate facts")), "the judge asked the session's model");

		const again = await remember(
			"Deploy the site with make ship",
			"To deploy the site, run `make ship` from the repo root.",
			judgeAnswer({ covered_by: neighbour, action: () => "reinforce" }),
		);
		assert.match(again, /^Already known: \[[\w-]+\] Deploys run with make ship/);

		const rewrite = (context: Context) => {
			assert.match(JSON.stringify(context.messages), /make deploy/);
			return JSON.stringify({ caption: "Deploys run with make deploy", content: "Run `make deploy` from the repo root to deploy the site; `make ship` is gone." });
		};
		const edited = await remember(
			"Deploys now run with make deploy",
			"`make ship` was replaced: run `make deploy` from the repo root to deploy the site.",
			judgeAnswer({ conflict_with: neighbour, action: () => "edit" }),
			rewrite,
		);
		assert.match(edited, /^Updated \[[\w-]+\] Deploys run with make deploy \(shared\): the new fact replaced what conflicted\./);

		const stored = await facts();
		assert.equal(stored.length, 1, stored.join("\n---\n"));
		assert.match(stored[0], /make deploy/);
		// audit names the judge that decided, with its cost.
		const id = /\[([\w-]+)\]/.exec(edited)?.[1] as string;
		assert.match(realmem("audit", id), /Judge: chat:scripted \(1 request/);
		assert.deepEqual(pi.extensionErrors, []);
	});

	test("a reply that is not the judge's JSON queues the candidate and says why", async () => {
		assert.ok(pi);
		const result = await remember("Lint with ruff", "Run `ruff check .` before committing.", () => "I think this is a good fact.");
		assert.match(result, /^Queued: the chat judge refused the request \(the chat judge's reply holds no JSON object: 'I think this is a good fact\.'\)/);
		const missing = await remember("Format with black", "Run `black .` before committing.", (context) => {
			const answer = JSON.parse(judgeAnswer()(context));
			delete answer.answers.importance;
			return JSON.stringify(answer);
		});
		assert.match(missing, /^Queued: the chat judge refused the request \(the chat judge's reply lacks an answer to 'importance'\)/);
		assert.deepEqual(pi.extensionErrors, []);
	});
});
