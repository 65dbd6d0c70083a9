/**
 * Where the extension finds the Python core, and what first-use set-up says when it cannot run
 * (extensions/realmem/setup.ts). The set-up itself, pip and all, runs in install.test.ts.
 */
import assert from "node:assert/strict";
import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { ensureCore, findCore, ownCore } from "../extensions/realmem/setup.js";

describe("finding and setting up the core", () => {
	let dir: string;
	let root: string;
	let bin: string;
	let home: string;

	async function executable(path: string, body = "#!/bin/sh\nexit 0\n"): Promise<string> {
		await mkdir(join(path, ".."), { recursive: true });
		await writeFile(path, body);
		await chmod(path, 0o755);
		return path;
	}

	before(async () => {
		dir = await mkdtemp(join(tmpdir(), "realmem-setup-"));
		root = join(dir, "package"); // a package without .venv, as npm installs it
		bin = join(dir, "bin");
		home = join(dir, "home");
		await mkdir(root);
		await mkdir(bin);
	});
	after(async () => {
		await rm(dir, { recursive: true, force: true });
	});

	test("REALMEM_BIN, then the package's .venv, then PATH, then the core set up on first use", async () => {
		const env = { PATH: bin, REALMEM_HOME: home };
		assert.equal(findCore(env, root), undefined, "nothing yet: set-up is needed");
		const own = ownCore(env);
		await executable(own.bin);
		assert.equal(findCore(env, root), undefined, "a core without its marker is a set-up cut short");
		await writeFile(own.marker, "{}\n");
		assert.equal(findCore(env, root), own.bin);
		const onPath = await executable(join(bin, "realmem"));
		assert.equal(findCore(env, root), onPath);
		const venv = await executable(join(root, ".venv", "bin", "realmem"));
		assert.equal(findCore(env, root), venv);
		assert.equal(findCore({ ...env, REALMEM_BIN: "/opt/realmem" }, root), "/opt/realmem");
	});

	test("set-up names the Python it needs when none is found, or only an old one", async () => {
		const env = { PATH: join(dir, "empty"), REALMEM_HOME: join(dir, "home2"), REALMEM_PYTHON: join(bin, "no-such-python") };
		const root = join(dir, "bare-package");
		await assert.rejects(
			ensureCore(env, () => {}, root),
			/realmem's core needs Python >= 3\.11 \(REALMEM_PYTHON=.*no-such-python does not run\)\. Install it, or set REALMEM_PYTHON/,
		);
		const old = await executable(join(bin, "python-old"), "#!/bin/sh\necho 3.8\n");
		await assert.rejects(
			ensureCore({ ...env, REALMEM_PYTHON: old }, () => {}, root),
			new RegExp(`needs Python >= 3\\.11 \\(${old.replaceAll("/", "\\/")} is 3\\.8\\)`),
		);
	});
});
