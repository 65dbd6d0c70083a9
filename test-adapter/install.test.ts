/**
 * realmem installed the ways Pi installs a package, from a packed tarball, with install scripts
 * disabled (npm 12 blocks a dependency's scripts): `npm install <tarball> --prefix <root>` (an
 * npm: spec) and `npm install --omit=dev --legacy-peer-deps` in a git clone (a git: spec). The
 * first session then sets the Python core up itself (extensions/realmem/setup.ts), stores a fact
 * and recalls it. Slow (two pip installs, warm caches: about a minute each on 2 cores).
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { accessSync, constants, existsSync, mkdirSync, readdirSync } from "node:fs";
import { homedir } from "node:os";
import { delimiter, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { createEnv, openPi, REPO, stopWorkers, type TestEnv, toolResultTexts } from "./harness.js";

// The caller's package caches, read before createEnv points HOME at a temp dir: the test measures
// the install routes, not the network.
const CACHES = {
	PIP_CACHE_DIR: process.env.PIP_CACHE_DIR ?? join(homedir(), ".cache", "pip"),
	npm_config_cache: process.env.npm_config_cache ?? join(homedir(), ".npm"),
};

/** PATH without any directory that holds a `realmem` (the checkout's .venv/bin is on it in CI). */
function pathWithoutRealmem(path: string): string {
	return path
		.split(delimiter)
		.filter((dir) => {
			try {
				accessSync(join(dir, "realmem"), constants.X_OK);
				return false;
			} catch {
				return true;
			}
		})
		.join(delimiter);
}

describe("installed from a tarball with scripts disabled, the first session sets the core up", () => {
	let env: TestEnv;
	let tarball: string;
	const saved = { PATH: process.env.PATH, REALMEM_BIN: process.env.REALMEM_BIN };

	before(async () => {
		env = await createEnv();
		delete process.env.REALMEM_BIN;
		process.env.PATH = pathWithoutRealmem(process.env.PATH ?? "");
		Object.assign(process.env, CACHES);
		const packs = join(env.root, "packs");
		mkdirSync(packs);
		execFileSync("npm", ["pack", "--silent", "--pack-destination", packs], { cwd: REPO, stdio: "pipe" });
		tarball = join(packs, readdirSync(packs)[0]);
	});
	after(async () => {
		process.env.PATH = saved.PATH;
		if (saved.REALMEM_BIN !== undefined) process.env.REALMEM_BIN = saved.REALMEM_BIN;
		await env.cleanup();
	});

	const npm = (cwd: string, ...args: string[]) =>
		execFileSync("npm", [...args, "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"], { cwd, stdio: "pipe" });

	/** A first session with the extension at `extension`: set-up, remember, recall. */
	async function firstSession(route: string, extension: string, home: string): Promise<void> {
		process.env.REALMEM_HOME = home;
		const pi = await openPi(env, { extension });
		try {
			assert.deepEqual(pi.extensionErrors, []);
			const said = pi.notifications.map((n) => n.message);
			assert.ok(said.includes("realmem: the Python core is set up."), JSON.stringify(said));
			assert.ok(existsSync(join(home, "core", "0.1.0", ".installed")), "the core sits under REALMEM_HOME/core/<version>");
			pi.script(
				["realmem_remember", { caption: `Releases are cut with make release-${route}`, content: `Run \`make release-${route}\` on main.`, user_requested: true }],
				"Stored.",
			);
			await pi.session.prompt("Remember how releases are cut.");
			assert.match(toolResultTexts(pi.contexts.at(-1)).at(-1) ?? "", /^Stored \[/);
			pi.script(["realmem_recall", { queries: [`make release-${route}`] }], "Found it.");
			await pi.session.prompt("How are releases cut?");
			assert.ok(toolResultTexts(pi.contexts.at(-1)).at(-1)?.includes(`Releases are cut with make release-${route}`));
		} finally {
			await pi.close();
			await stopWorkers(home); // before cleanup removes the home it writes into
		}
	}

	test("npm: npm install <tarball> --prefix <root>", async () => {
		const root = join(env.root, "npm-root");
		mkdirSync(root);
		npm(root, "install", tarball, "--prefix", root);
		const installed = join(root, "node_modules", "realmem");
		assert.ok(!existsSync(join(installed, "tests")) && !existsSync(join(installed, "test-adapter")), "tests stay out of the package");
		await firstSession("npm", join(installed, "extensions", "realmem", "index.ts"), join(env.root, "home-npm"));
	});

	test("git: npm install --omit=dev --legacy-peer-deps in a clone", async () => {
		const clone = join(env.root, "git-clone");
		execFileSync("git", ["clone", "-q", REPO, clone], { stdio: "pipe" });
		npm(clone, "install", "--omit=dev", "--legacy-peer-deps");
		await firstSession("git", join(clone, "extensions", "realmem", "index.ts"), join(env.root, "home-git"));
	});
});
