/**
 * The checkout as a Pi package (what `pi install <checkout>` registers): the manifest must yield
 * the extension and the realmem skill, and the skill must also reach `pi -e` users through
 * resources_discover without a duplicate.
 */
import assert from "node:assert/strict";
import { realpathSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { DefaultResourceLoader, type ExtensionAPI, SettingsManager, VERSION } from "@earendil-works/pi-coding-agent";
import realmemExtension, { assertSupportedPi, MIN_PI_VERSION } from "../extensions/realmem/index.js";
import { createEnv, EXTENSION, openPi, REPO, type TestEnv } from "./harness.js";

describe("package manifest", () => {
	let env: TestEnv;
	const savedBin = process.env.REALMEM_BIN;
	before(async () => {
		env = await createEnv();
		// Loading resources needs no core; keep the session test below independent of Python.
		process.env.REALMEM_BIN = "/nonexistent/realmem";
	});
	after(async () => {
		if (savedBin === undefined) delete process.env.REALMEM_BIN;
		else process.env.REALMEM_BIN = savedBin;
		await env.cleanup();
	});

	test("a package entry for the checkout loads the extension and the skill", async () => {
		const settingsManager = SettingsManager.inMemory({ packages: [REPO] });
		const loader = new DefaultResourceLoader({ cwd: env.cwd, agentDir: env.agentDir, settingsManager });
		await loader.reload();
		const { extensions, errors } = loader.getExtensions();
		assert.deepEqual(errors, []);
		assert.ok(
			extensions.some((e) => realpathSync(e.resolvedPath) === realpathSync(EXTENSION)),
			extensions.map((e) => e.resolvedPath).join(", "),
		);
		const skill = loader.getSkills().skills.find((s) => s.name === "realmem");
		assert.ok(skill, "realmem skill loaded from the manifest");
		assert.match(skill.description, /recall/);
	});

	test("loaded by path (pi -e), the extension contributes the skill itself", async () => {
		const pi = await openPi(env);
		try {
			pi.script("hi");
			await pi.session.prompt("hello");
			assert.match(pi.systemPrompts[0], /<name>realmem<\/name>/);
			assert.equal(pi.systemPrompts[0].match(/<name>realmem<\/name>/g)?.length, 1);
		} finally {
			await pi.close();
		}
	});

	test("an older Pi gets a load error that names the version it needs", () => {
		assert.equal(VERSION, MIN_PI_VERSION, "the tests run on the oldest supported Pi");
		const current = { registerToolRenderer: () => undefined } as unknown as ExtensionAPI;
		assert.doesNotThrow(() => assertSupportedPi(current));
		assert.throws(() => assertSupportedPi(current, "1.5.2"), /needs Pi 1\.6\.0 or newer .*this Pi is 1\.5\.2\. Update it/);
		// Pi 0.x (@mariozechner) lacks registerToolRenderer, whatever VERSION resolves to.
		assert.throws(() => realmemExtension({} as ExtensionAPI), /needs Pi 1\.6\.0 or newer .*this Pi is 0\.x/);
	});
});
