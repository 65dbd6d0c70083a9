/**
 * The "ignored by git" note in a real Pi session (SDK + faux model, the real core): it follows
 * `/realmem fix-gitignore` and rules added by hand within the same session, because the core
 * re-checks whenever an ignore source changed instead of remembering its first answer.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { appendFile, readFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import {
	createEnv,
	openPi,
	type PiHarness,
	REAL_CORE,
	recordingUI,
	type TestEnv,
	toolResultTexts,
	waitFor,
} from "./harness.js";

const NOTE = "note: .pi/realmem is ignored by git; this memory will not be committed";

describe("the git-ignore note in a session", { skip: !existsSync(REAL_CORE) && `${REAL_CORE} is not installed` }, () => {
	let env: TestEnv;
	let pi: PiHarness | undefined;
	const savedBin = process.env.REALMEM_BIN;

	before(async () => {
		delete process.env.REALMEM_BIN;
		env = await createEnv({ ".gitignore": "node_modules/\n.pi/\n" });
	});
	after(async () => {
		await pi?.close();
		if (savedBin !== undefined) process.env.REALMEM_BIN = savedBin;
		await env.cleanup();
	});

	/** One turn in which the model remembers a shared fact; returns the tool's answer. */
	async function rememberShared(harness: PiHarness, caption: string, content: string): Promise<string> {
		harness.script(["realmem_remember", { caption, content, scope: "shared", user_requested: true }], "Stored.");
		await harness.session.prompt(`Remember: ${caption}.`);
		const result = toolResultTexts(harness.contexts.at(-1)).at(-1);
		assert.ok(result, "the remember tool answered");
		assert.match(result, /^Stored \[/);
		return result;
	}

	test("disappears after /realmem fix-gitignore and comes back when a rule ignores the store again", async () => {
		const ui = recordingUI({ confirm: true });
		pi = await openPi(env, { ui });
		// Session start warns, naming the rule.
		await waitFor(
			() => ui.notifications.some((n) => n.level === "warning" && /ignored by git \(\.gitignore:2: \.pi\/\)/.test(n.message)),
			"the session-start warning",
		);

		const first = await rememberShared(pi, "Run tests with make check", "`make check` runs the whole suite.");
		assert.ok(first.includes(NOTE), first);

		await pi.session.prompt("/realmem fix-gitignore");
		assert.match(ui.notifications.at(-1)?.message ?? "", /^Appended to .*\.gitignore: !\/\.pi\/, \/\.pi\/\*, !\/\.pi\/realmem\//);
		assert.match(await readFile(join(env.cwd, ".gitignore"), "utf8"), /!\/\.pi\/realmem\/\*\*\n$/);

		const second = await rememberShared(pi, "Deploy with make deploy", "`make deploy` ships the site.");
		assert.ok(!second.includes("ignored by git"), second);

		// The reverse, mid-session: a rule added by hand ignores the store again.
		await appendFile(join(env.cwd, ".gitignore"), ".pi/realmem/*.md\n");
		const third = await rememberShared(pi, "Lint with ruff", "Run `ruff check .` before committing.");
		assert.ok(third.includes(NOTE), third);
		assert.deepEqual(pi.extensionErrors, []);
	});
});
