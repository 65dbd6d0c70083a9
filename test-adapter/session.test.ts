/**
 * End-to-end adapter tests: a real Pi session (SDK + faux model, no network) with the realmem
 * extension loaded by path and the real Python core (`realmem rpc`) behind it.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { after, afterEach, before, describe, test } from "node:test";
import { type ExtensionAPI, type ExtensionUIContext, initTheme } from "@earendil-works/pi-coding-agent";
import { Type } from "typebox";
import {
	createEnv,
	type Fakes,
	openPi,
	type PiHarness,
	REAL_CORE,
	recordingUI,
	startFakes,
	type TestEnv,
	toolResultTexts,
	waitFor,
} from "./harness.js";

const SNAPSHOT = "realmem-snapshot";
const SHOWN = "realmem-shown";
const DISABLED = "ctx_memory is disabled: realmem is this session's memory system; use realmem_recall / realmem_remember";

function lastAssistantText(pi: PiHarness): string {
	const messages = pi.session.messages;
	for (let i = messages.length - 1; i >= 0; i--) {
		const m = messages[i];
		if (m.role === "assistant") return m.content.map((c) => (c.type === "text" ? c.text : "")).join("");
	}
	return "";
}

function customEntries(pi: PiHarness, type: string) {
	return pi.session.sessionManager
		.getBranch()
		.filter((e) => e.type === "custom" && e.customType === type)
		.map((e) => (e.type === "custom" ? e.data : undefined));
}

/** Stand-in for Magic Context's memory tool: records whether it ever ran. */
function otherMemorySystem(ran: string[]) {
	return (pi: ExtensionAPI) => {
		pi.registerTool({
			name: "ctx_memory",
			label: "ctx_memory",
			description: "Another memory system's tool",
			parameters: Type.Object({ note: Type.Optional(Type.String()) }),
			async execute(_id, params) {
				ran.push(params.note ?? "");
				return { content: [{ type: "text", text: "stored by ctx_memory" }], details: undefined };
			},
		});
	};
}

describe("without the core", () => {
	let env: TestEnv;
	let pi: PiHarness | undefined;
	const savedBin = process.env.REALMEM_BIN;

	before(async () => {
		env = await createEnv();
		process.env.REALMEM_BIN = "/nonexistent/realmem";
	});
	afterEach(async () => {
		await pi?.close();
		pi = undefined;
	});
	after(async () => {
		if (savedBin === undefined) delete process.env.REALMEM_BIN;
		else process.env.REALMEM_BIN = savedBin;
		await env.cleanup();
	});

	test("tools answer with a clear error and Pi still answers", async () => {
		pi = await openPi(env);
		pi.script(["realmem_recall", { queries: ["how to run tests"] }], "Answered without memory.");
		await pi.session.prompt("How do I run the tests?");
		assert.equal(lastAssistantText(pi), "Answered without memory.");
		const result = pi.session.messages.find((m) => m.role === "toolResult");
		assert.ok(result && result.role === "toolResult");
		assert.equal(result.isError, true);
		const text = result.content.map((c) => (c.type === "text" ? c.text : "")).join("");
		assert.match(text, /realmem is unavailable: realmem core not found \(\/nonexistent\/realmem\)/);
		assert.match(text, /REALMEM_BIN/);
		const warnings = pi.notifications.filter((n) => n.level === "warning");
		assert.equal(warnings.length, 1, JSON.stringify(pi.notifications));
		assert.deepEqual(pi.extensionErrors, []);
		// No snapshot is stored while the core is down, so a later turn can still get one.
		assert.deepEqual(customEntries(pi, SNAPSHOT), []);
	});

	test("other memory tools are deactivated and blocked even then", async () => {
		const ran: string[] = [];
		pi = await openPi(env, { extensionFactories: [otherMemorySystem(ran)] });
		assert.ok(!pi.session.getActiveToolNames().includes("ctx_memory"));
		assert.ok(pi.session.getActiveToolNames().includes("realmem_recall"));
		// Another extension turning it back on must not let calls through.
		pi.session.setActiveToolsByName([...pi.session.getActiveToolNames(), "ctx_memory"]);
		pi.script(["ctx_memory", { note: "remember this" }], "ok");
		await pi.session.prompt("Remember that we use pnpm.");
		assert.deepEqual(ran, []);
		const [blocked] = toolResultTexts(pi.contexts.at(-1));
		assert.equal(blocked, DISABLED);
	});

	test("a call to the deactivated tool gets realmem's message, the same on every model call", async () => {
		const ran: string[] = [];
		pi = await openPi(env, { extensionFactories: [otherMemorySystem(ran)] });
		assert.ok(!pi.session.getActiveToolNames().includes("ctx_memory"));
		pi.script(["ctx_memory", { note: "remember this" }], "noted", "second answer");
		await pi.session.prompt("Remember that we use pnpm.");
		await pi.session.prompt("And now?");
		assert.deepEqual(ran, []);
		// The model saw realmem's message after the call and again, byte for byte, on the next turn.
		assert.deepEqual(toolResultTexts(pi.contexts[1]), [DISABLED]);
		assert.deepEqual(toolResultTexts(pi.contexts[2]), [DISABLED]);
		// The session file keeps Pi's own answer; only the model's copy is rewritten.
		const stored = pi.session.messages.find((m) => m.role === "toolResult");
		assert.ok(stored && stored.role === "toolResult");
		assert.equal(stored.content.map((c) => (c.type === "text" ? c.text : "")).join(""), "Tool ctx_memory not found");
		// The user, who sees Pi's "not found" line, is told once what the model got instead.
		const told = pi.notifications.filter((n) => n.message.includes(DISABLED));
		assert.deepEqual(told, [{ message: `realmem: the model was told: ${DISABLED}`, level: "info" }]);
	});
});

describe("with the real core", { skip: !existsSync(REAL_CORE) && `${REAL_CORE} is not installed` }, () => {
	let env: TestEnv;
	const open: PiHarness[] = [];
	const savedBin = process.env.REALMEM_BIN;

	before(async () => {
		delete process.env.REALMEM_BIN;
		env = await createEnv({
			"AGENTS.md": "# Agents\n\nRun the tests with `make check`.\n",
			"db/schema.sql": "create table t (id int);\n",
			"src/app.py": "print('hi')\n",
		});
	});
	afterEach(async () => {
		while (open.length) await open.pop()?.close();
	});
	after(async () => {
		if (savedBin !== undefined) process.env.REALMEM_BIN = savedBin;
		await env.cleanup();
	});

	async function session(sessionFile?: string, keepRecentTokens?: number): Promise<PiHarness> {
		const pi = await openPi(env, { sessionFile, keepRecentTokens });
		open.push(pi);
		return pi;
	}

	test("remember through the tool writes a fact file under .pi/realmem", async () => {
		const pi = await session();
		pi.script(
			[
				"realmem_remember",
				{
					caption: "Schema changes go through db/schema.sql",
					content: "Edit `db/schema.sql` and run `make migrate`; never alter tables by hand.",
					scope: "shared",
					paths: ["db"],
					user_requested: true,
				},
			],
			"Stored.",
		);
		await pi.session.prompt("Remember: schema changes go through db/schema.sql.");
		const [result] = toolResultTexts(pi.contexts.at(-1));
		assert.ok(result, "the remember tool answered");
		assert.doesNotMatch(result, /unavailable|error/i);
		const store = join(env.cwd, ".pi", "realmem");
		const files = (await readdir(store)).filter((f) => f.endsWith(".md"));
		assert.equal(files.length, 1, `fact files: ${files}`);
		const fact = await readFile(join(store, files[0]), "utf8");
		assert.match(fact, /caption: Schema changes go through db\/schema\.sql/);
		assert.match(fact, /make migrate/);
		assert.deepEqual(pi.extensionErrors, []);
	});

	test("a read of a covered file appends the note once per branch, also after reload", async () => {
		const pi = await session();
		pi.script(["read", { path: "db/schema.sql" }], ["read", { path: "db/schema.sql" }], "Read twice.");
		await pi.session.prompt("Look at the schema.");
		const [first, second] = toolResultTexts(pi.contexts.at(-1));
		assert.match(first, /<realmem-path-notes>/);
		assert.match(first, /Schema changes go through db\/schema\.sql/);
		assert.doesNotMatch(second, /<realmem-path-notes>/);
		const shown = customEntries(pi, SHOWN) as Array<{ ids: string[] }>;
		assert.equal(shown.length, 1);
		assert.equal(shown[0].ids.length, 1);

		const file = pi.session.sessionFile;
		assert.ok(file);
		await open.pop()?.close();

		const resumed = await session(file);
		resumed.script(["read", { path: "db/schema.sql" }], "Read again.");
		await resumed.session.prompt("Once more.");
		const texts = toolResultTexts(resumed.contexts.at(-1));
		assert.doesNotMatch(texts.at(-1) ?? "", /<realmem-path-notes>/);
	});

	test("tree navigation away from a note shows it again on the other branch", async () => {
		const pi = await session();
		pi.script("started");
		await pi.session.prompt("start");
		pi.script(["read", { path: "db/schema.sql" }], "read");
		await pi.session.prompt("read the schema");
		assert.match(toolResultTexts(pi.contexts.at(-1))[0], /<realmem-path-notes>/);

		const prompt = pi.session.sessionManager
			.getBranch()
			.find((e) => e.type === "message" && e.message.role === "user" && JSON.stringify(e.message.content).includes("read the schema"));
		assert.ok(prompt);
		await pi.session.navigateTree(prompt.id);
		pi.script(["read", { path: "db/schema.sql" }], "read again");
		await pi.session.prompt("read the schema on another branch");
		const texts = toolResultTexts(pi.contexts.at(-1));
		assert.equal(texts.length, 1);
		assert.match(texts[0], /<realmem-path-notes>/);
	});

	test("after a compaction, notes only in summarized tool results are shown again", async () => {
		const pi = await session(undefined, 1);
		pi.script(["read", { path: "db/schema.sql" }], "read");
		await pi.session.prompt("read the schema");
		assert.match(toolResultTexts(pi.contexts.at(-1))[0], /<realmem-path-notes>/);
		pi.script("a later answer");
		await pi.session.prompt("something else");
		pi.script("Summary of the earlier work.");
		await pi.session.compact();
		pi.script(["read", { path: "db/schema.sql" }], "read after compaction");
		await pi.session.prompt("read it again");
		assert.match(toolResultTexts(pi.contexts.at(-1)).at(-1) ?? "", /<realmem-path-notes>/);
	});

	test("the system prompt is byte-identical across turns and reload", async () => {
		const pi = await session();
		pi.script("one", "two");
		await pi.session.prompt("first");
		await pi.session.prompt("second");
		assert.equal(pi.systemPrompts.length, 2);
		assert.equal(pi.systemPrompts[0], pi.systemPrompts[1]);
		assert.match(pi.systemPrompts[0], /<realmem>[\s\S]*<\/realmem>\s*$/);
		assert.equal(customEntries(pi, SNAPSHOT).length, 1);

		const file = pi.session.sessionFile;
		await open.pop()?.close();
		const resumed = await session(file);
		resumed.script("three");
		await resumed.session.prompt("third");
		assert.equal(resumed.systemPrompts[0], pi.systemPrompts[0]);
		assert.equal(customEntries(resumed, SNAPSHOT).length, 1);
	});

	test("/realmem runs subcommands directly and from its menu", async () => {
		const ui = recordingUI({ select: ["status"] });
		const pi = await openPi(env, { ui });
		open.push(pi);
		await pi.session.prompt("/realmem status");
		await pi.session.prompt("/realmem");
		const statuses = ui.notifications.filter((n) => /shared\s+\d+ memor/.test(n.message));
		assert.equal(statuses.length, 2, JSON.stringify(ui.notifications));
		await pi.session.prompt("/realmem frobnicate");
		assert.match(ui.notifications.at(-1)?.message ?? "", /Unknown \/realmem subcommand "frobnicate"\. Available: status, add, import/);
		// Commands never reach the model.
		assert.equal(pi.systemPrompts.length, 0);
	});

	test("/realmem add: the paths step checks paths, warns about missing ones, and stores them", async () => {
		const fakes = await startFakes(["semif"]);
		process.env.REALMEM_SEMIF_URL = fakes.urls.semif;
		try {
			const ui = recordingUI({
				select: ["shared"],
				input: [
					"Protobuf stubs are generated with buf",
					"Run `buf generate` whenever a .proto file changes; never hand-edit generated stubs.",
					"~nobody/x",
					"db, src/*.py, docs/later.md",
				],
				confirm: true,
			});
			const pi = await openPi(env, { ui });
			open.push(pi);
			await pi.session.prompt("/realmem add");
			// An unusable path asks again; a missing one is kept only after the confirm.
			assert.ok(
				ui.notifications.some((n) => n.message.startsWith("Not a usable path: only ~ and ~/ are supported")),
				JSON.stringify(ui.notifications),
			);
			assert.deepEqual(ui.confirms, [
				{ title: "Some paths do not exist", message: "docs/later.md: does not exist (yet)\n\nKeep them anyway?" },
			]);
			assert.match(ui.notifications.at(-1)?.message ?? "", /^Stored \[/);
			const store = join(env.cwd, ".pi", "realmem");
			const files = (await readdir(store)).filter((f) => f.endsWith(".md"));
			const facts = await Promise.all(files.map((f) => readFile(join(store, f), "utf8")));
			const fact = facts.find((text) => text.includes("Protobuf stubs are generated with buf"));
			assert.ok(fact, facts.join("\n---\n"));
			assert.match(fact, /db\n[\s\S]*src\/\*\.py[\s\S]*docs\/later\.md/);
			assert.equal(pi.systemPrompts.length, 0, "the add never reaches the model");
		} finally {
			delete process.env.REALMEM_SEMIF_URL;
			while (open.length) await open.pop()?.close();
			await fakes.stop();
		}
	});

	test("the Pi model bridge serves the session's model while the session lives", async () => {
		const pi = await session();
		const file = join(env.realmemHome, "bridge", `${process.pid}.json`);
		await waitFor(() => existsSync(file), "the bridge file");
		const info = JSON.parse(await readFile(file, "utf8")) as { url: string; token: string; pid: number };
		assert.equal(info.pid, process.pid);
		pi.script("rewritten");
		const response = await fetch(`${info.url}/v1/chat/completions`, {
			method: "POST",
			headers: { authorization: `Bearer ${info.token}`, "content-type": "application/json" },
			body: JSON.stringify({ messages: [{ role: "user", content: "rewrite" }] }),
		});
		assert.equal(response.status, 200);
		const body = (await response.json()) as { model: string; choices: Array<{ message: { content: string } }> };
		assert.equal(body.model, "scripted");
		assert.equal(body.choices[0].message.content, "rewritten");
		await open.pop()?.close();
		assert.equal(existsSync(file), false);
	});

	test("an import strips AGENTS.md from the next session on, and an unchanged file is not imported again", async () => {
		const pi = await session();
		pi.script("before");
		await pi.session.prompt("hello");
		assert.match(
			pi.systemPrompts[0],
			/<project_context>\nProject-specific instructions and guidelines:\n\n<project_instructions path="[^"]*AGENTS\.md">\n# Agents/,
		);

		// /realmem import: the agent stores facts from the file, then import_finish marks it.
		pi.script(
			[
				"realmem_remember",
				{
					caption: "Run the tests with make check",
					content: "`make check` runs the whole test suite.",
					scope: "shared",
					user_requested: true,
				},
			],
			"Imported.",
		);
		const before = pi.notifications.length;
		await pi.session.prompt("/realmem import");
		// The command hands the import instruction to the agent; import_finish runs at agent_end.
		await waitFor(() => pi.notifications.length >= before + 2, "import_begin and import_finish notifications");
		await pi.session.agent.waitForIdle();
		assert.match(pi.notifications.at(-1)?.message ?? "", /Imported AGENTS\.md \(1 facts? stored\)/);

		// The running session's prompt stays byte-identical (prompt cache), import or not.
		pi.script("still here");
		await pi.session.prompt("after the import");
		assert.ok(pi.systemPrompts.length >= 4);
		for (const prompt of pi.systemPrompts) assert.equal(prompt, pi.systemPrompts[0]);

		// The next session no longer carries the file, nor an empty project_context section, and
		// its start notification says which file realmem strips (Pi's [Context] list still shows it).
		await open.pop()?.close();
		const fresh = await session();
		await waitFor(() => fresh.notifications.some((n) => /not in the prompt/.test(n.message)), "the session-start notification");
		assert.ok(
			fresh.notifications.some((n) => n.message.includes("Imported, so not in the prompt: AGENTS.md (realmem replaces it).")),
			JSON.stringify(fresh.notifications),
		);
		fresh.script("after");
		await fresh.session.prompt("hello again");
		assert.doesNotMatch(fresh.systemPrompts[0], /Run the tests with `make check`/);
		assert.doesNotMatch(fresh.systemPrompts[0], /project_context|project_instructions/);
		assert.match(fresh.systemPrompts[0], /<realmem>/);

		// Importing the unchanged file again does nothing: no agent run, no new import.
		const calls = fresh.systemPrompts.length;
		await fresh.session.prompt("/realmem import");
		await fresh.session.agent.waitForIdle();
		assert.equal(
			fresh.notifications.at(-1)?.message,
			"AGENTS.md is already imported and unchanged since; nothing to do (/realmem import --force imports again).",
		);
		assert.equal(fresh.systemPrompts.length, calls);

		// --force runs the import again; storing nothing new leaves the earlier import standing.
		fresh.script("Nothing new to store.");
		const forcedAt = fresh.notifications.length;
		await fresh.session.prompt("/realmem import --force");
		await waitFor(() => fresh.notifications.length >= forcedAt + 2, "the forced import's notifications");
		await fresh.session.agent.waitForIdle();
		assert.equal(fresh.systemPrompts.length, calls + 1);
		assert.equal(fresh.notifications.at(-1)?.message, "No new facts were stored; AGENTS.md stays imported from the earlier import.");
	});
});

describe("import of two context files", { skip: !existsSync(REAL_CORE) && `${REAL_CORE} is not installed` }, () => {
	let env: TestEnv;
	let pi: PiHarness | undefined;

	before(async () => {
		delete process.env.REALMEM_BIN;
		env = await createEnv({
			"AGENTS.md": "# Agents\n\nRun the tests with `make check`.\n",
			"CLAUDE.md": "# Claude\n\nNever push to main directly.\n",
		});
	});
	after(async () => {
		await pi?.close();
		await env.cleanup();
	});

	test("each file is imported only by the facts stored from it, into the shared store by default", async () => {
		pi = await openPi(env);
		const harness = pi;
		// The first run gets AGENTS.md alone and stores one fact, scope left out; the second run
		// gets CLAUDE.md and stores nothing.
		harness.script(
			["realmem_remember", { caption: "Run the tests with make check", content: "`make check` runs the test suite." }],
			"Stored one fact.",
			"Nothing worth storing.",
		);
		await harness.session.prompt("/realmem import");
		await waitFor(
			() => harness.notifications.some((n) => /No facts were stored from CLAUDE\.md/.test(n.message)),
			"both files' import notifications",
			60_000,
		);
		await harness.session.agent.waitForIdle();
		const texts = harness.notifications.map((n) => n.message);
		assert.ok(texts.some((t) => /^Imported AGENTS\.md \(1 fact stored\).* Next: CLAUDE\.md\.$/.test(t)), JSON.stringify(texts));
		assert.ok(!texts.some((t) => /^Imported CLAUDE\.md/.test(t)), JSON.stringify(texts));
		// The fact went to the committed shared store, not the judge's pick.
		const shared = join(env.cwd, ".pi", "realmem");
		assert.ok(existsSync(shared) && readdirSync(shared, { recursive: true }).some((f) => String(f).endsWith(".md")));
		await harness.close();
		pi = undefined;

		// The next session strips AGENTS.md only: CLAUDE.md, with no fact stored, is not imported.
		const fresh = await openPi(env);
		pi = fresh;
		await waitFor(() => fresh.notifications.some((n) => /not in the prompt/.test(n.message)), "the session-start notification");
		const start = fresh.notifications.find((n) => /not in the prompt/.test(n.message))?.message ?? "";
		assert.match(start, /Imported, so not in the prompt: AGENTS\.md \(realmem replaces it\)\./);
		assert.doesNotMatch(start, /CLAUDE\.md/);
	});
});

describe("consolidation cancel", { skip: !existsSync(REAL_CORE) && `${REAL_CORE} is not installed` }, () => {
	let env: TestEnv;
	let fakes: Fakes | undefined;
	let pi: PiHarness | undefined;

	before(async () => {
		delete process.env.REALMEM_BIN;
		// Enough memories that the judge is still reviewing when the cancel arrives.
		const files: Record<string, string> = {};
		for (let i = 1; i <= 40; i++) {
			files[`.pi/realmem/fact-${i}.md`] = `---\ncaption: Fact number ${i} about the build\n---\n\nStep ${i} of the build runs \`make step-${i}\`.\n`;
		}
		env = await createEnv(files);
		fakes = await startFakes(["semif"]);
		process.env.REALMEM_SEMIF_URL = fakes.urls.semif;
		process.env.REALMEM_CONSOLIDATE_PATHS = "0";
	});
	after(async () => {
		await pi?.close();
		delete process.env.REALMEM_SEMIF_URL;
		delete process.env.REALMEM_CONSOLIDATE_PATHS;
		await fakes?.stop();
		await env.cleanup();
	});

	test("Esc says cancelling… at once, ignores late progress, then cancelled: nothing written", async () => {
		// Pi's loader draws key hints from the global theme, which interactive mode initialises.
		initTheme("dark", false);
		const recorded = recordingUI();
		let loader: { handleInput(data: string): void; dispose?(): void } | undefined;
		// Interactive mode's custom(): build the component, dispose it when it is done.
		const custom: ExtensionUIContext["custom"] = (factory) =>
			new Promise((resolve) => {
				const tui = { requestRender: () => undefined, terminal: { rows: 40, columns: 100 } };
				const theme = { fg: (_c: string, t: string) => t, bg: (_c: string, t: string) => t, bold: (t: string) => t };
				let component: { dispose?(): void } | undefined;
				const done = (result: unknown) => {
					component?.dispose?.();
					resolve(result as never);
				};
				void Promise.resolve(factory(tui as never, theme as never, undefined as never, done)).then((built) => {
					component = built as never;
					loader = built as never;
				});
			});
		const ui = { ...recorded, ui: new Proxy(recorded.ui, { get: (t, p: string) => (p === "custom" ? custom : t[p as keyof ExtensionUIContext]) }) };
		pi = await openPi(env, { ui });
		const before = (await readdir(join(env.cwd, ".pi", "realmem"))).length;
		const running = pi.session.prompt("/realmem consolidate");
		await waitFor(() => recorded.statuses.some((s) => /^realmem consolidation: \d+\/\d+ review:/.test(s ?? "")), "review progress");
		assert.ok(loader, "the loader is shown");
		loader.handleInput("\x1b");
		// At once, before the core has noticed the cancel.
		assert.equal(recorded.statuses.at(-1), "realmem consolidation: cancelling…");
		const cancelledAt = recorded.statuses.length - 1;
		await running;
		// Progress still on its way after Esc never replaces "cancelling…"; the status is then cleared.
		assert.deepEqual(recorded.statuses.slice(cancelledAt), ["realmem consolidation: cancelling…", undefined]);
		assert.equal(recorded.notifications.at(-1)?.message, "Consolidation: cancelled: nothing written.");
		assert.equal((await readdir(join(env.cwd, ".pi", "realmem"))).length, before);
	});
});

describe("path notes the limits push out", { skip: !existsSync(REAL_CORE) && `${REAL_CORE} is not installed` }, () => {
	let env: TestEnv;
	let fakes: Fakes | undefined;
	const open: PiHarness[] = [];
	const savedBin = process.env.REALMEM_BIN;
	const ids: Record<string, string> = {};

	/** The core's command line in this test's REALMEM_HOME, with the fake judge configured. */
	let judgeUrl = "";
	const realmem = (...args: string[]) =>
		execFileSync(REAL_CORE, ["--home", env.realmemHome, "--cwd", env.cwd, ...args], {
			env: { ...process.env, REALMEM_SEMIF_URL: judgeUrl, REALMEM_WORKER_AUTOSTART: "0" },
			encoding: "utf8",
			stdio: ["ignore", "pipe", "pipe"],
		});

	/** Remember a fact on src/db the way a user does (`realmem add`); the fake judge gives its path urgency. */
	async function addNote(name: string, caption: string, content: string, urgency: number): Promise<void> {
		const scripted = await fetch(`${judgeUrl}/_control/script`, {
			method: "POST",
			headers: { "content-type": "application/json" },
			body: JSON.stringify({ path_urgency: { score: urgency } }),
		});
		assert.equal(scripted.status, 200);
		const out = JSON.parse(realmem("add", "--caption", caption, "--content", content, "--scope", "shared", "--path", "src/db", "--json")) as {
			action: string;
			id: string;
		};
		assert.equal(out.action, "add", JSON.stringify(out));
		ids[name] = out.id;
	}

	before(async () => {
		delete process.env.REALMEM_BIN;
		env = await createEnv({ "src/db/schema.sql": "create table t (id int);\n", "src/db/query.py": "q = 1\n" });
		fakes = await startFakes(["semif"]);
		judgeUrl = fakes.urls.semif;
		// Two High notes and one Low note on src/db; one full note per tool result and no captions.
		await addNote("first", "Schema edits need a migration", "Every change to schema.sql needs a new migration file.", 0.95);
		await addNote("second", "Queries go through the pool helper", "Call pool() for queries; raw connections leak under load.", 0.95);
		await addNote("low", "Origin of the module", "Written in 2019 as a port of an older Perl script.", 0.05);
		const urgency = JSON.parse(realmem("manage", "--json")) as Array<{ id: string; glyph: string }>;
		assert.deepEqual(urgency.map((m) => m.glyph).sort(), ["○", "●", "●"]);
		realmem("settings", "set", "pathNotes.maxFull", "1");
		realmem("settings", "set", "pathNotes.maxCaptions", "0");
	});
	afterEach(async () => {
		while (open.length) await open.pop()?.close();
	});
	after(async () => {
		await fakes?.stop();
		if (savedBin !== undefined) process.env.REALMEM_BIN = savedBin;
		await env.cleanup();
	});

	async function session(sessionFile?: string): Promise<PiHarness> {
		const pi = await openPi(env, { sessionFile });
		open.push(pi);
		return pi;
	}

	test("a demoted High note is shown at the next touch, in the same turn and after a reload", async () => {
		const pi = await session();
		pi.script(["read", { path: "src/db/schema.sql" }], "read");
		await pi.session.prompt("Look at the schema.");
		const [first] = toolResultTexts(pi.contexts.at(-1));
		assert.match(first, /Schema edits need a migration \(src\/db\)\nEvery change to schema\.sql needs a new migration file\./);
		assert.doesNotMatch(first, /Queries go through the pool helper|Origin of the module/);
		assert.match(first, /2 more memories are attached to src\/db/);
		// Only what the model saw in full, and the Low note that is only ever counted, are recorded.
		const shown = customEntries(pi, SHOWN) as Array<{ ids: string[] }>;
		assert.deepEqual(shown.map((e) => [...e.ids].sort()), [[ids.first, ids.low].sort()]);

		const file = pi.session.sessionFile;
		assert.ok(file);
		await open.pop()?.close();

		// Reload: the next touch shows the demoted note, and only it (no count line any more).
		const resumed = await session(file);
		resumed.script(["read", { path: "src/db/query.py" }], ["read", { path: "src/db/schema.sql" }], "read both");
		await resumed.session.prompt("Look at the queries.");
		const [second, third] = toolResultTexts(resumed.contexts.at(-1)).slice(-2);
		assert.match(second, /Queries go through the pool helper \(src\/db\)\nCall pool\(\) for queries; raw connections leak under load\./);
		assert.doesNotMatch(second, /Schema edits need a migration|more memor/);
		assert.doesNotMatch(third, /<realmem-path-notes>/);
		const all = (customEntries(resumed, SHOWN) as Array<{ ids: string[] }>).flatMap((e) => e.ids);
		assert.deepEqual([...all].sort(), [ids.first, ids.low, ids.second].sort());
	});

	test("within one turn, the second touch shows what the first pushed out", async () => {
		const pi = await session();
		pi.script(["read", { path: "src/db/schema.sql" }], ["read", { path: "src/db/query.py" }], ["read", { path: "src/db" }], "done");
		await pi.session.prompt("Read the db module.");
		const [first, second, third] = toolResultTexts(pi.contexts.at(-1));
		assert.match(first, /Every change to schema\.sql needs a new migration file\./);
		assert.match(second, /Call pool\(\) for queries; raw connections leak under load\./);
		assert.doesNotMatch(second, /Schema edits need a migration|more memor/);
		assert.doesNotMatch(third, /<realmem-path-notes>/);
	});
});
