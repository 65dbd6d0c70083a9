/**
 * Where the Python core is, and its set-up on first use.
 *
 * Found in this order: REALMEM_BIN; the checkout's .venv (a development checkout, or a git
 * install whose postinstall ran); `realmem` on PATH (pipx, uv tool); the core this extension set
 * up itself under REALMEM_HOME/core. When none is there, as after `pi install npm:realmem` with
 * install scripts disabled, the first session creates that virtual environment and installs the
 * package's own Python sources into it, once, with progress in the status line.
 */
import { spawn } from "node:child_process";
import { accessSync, constants, existsSync, readFileSync } from "node:fs";
import { mkdir, rm, stat, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import { delimiter, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The package root (extensions/realmem -> ../..): a checkout, or node_modules/realmem. */
export const PACKAGE_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
const BIN_DIR = process.platform === "win32" ? "Scripts" : "bin";
const EXE = process.platform === "win32" ? "realmem.exe" : "realmem";
const MIN_PYTHON: [number, number] = [3, 11];
/** A set-up lock older than this was left by a process that died: pip itself takes minutes at most. */
const STALE_LOCK_MS = 15 * 60_000;

function packageVersion(): string {
	try {
		return String(JSON.parse(readFileSync(join(PACKAGE_ROOT, "package.json"), "utf8")).version ?? "0");
	} catch {
		return "0";
	}
}

/** REALMEM_HOME as the core resolves it (realmem/config.py home_dir). */
export function realmemHome(env: NodeJS.ProcessEnv = process.env): string {
	return env.REALMEM_HOME ? resolve(env.REALMEM_HOME.replace(/^~(?=$|\/)/, env.HOME ?? homedir())) : join(env.HOME ?? homedir(), ".pi", "agent", "realmem");
}

/** The core this extension sets up: one virtual environment per package version. */
export function ownCore(env: NodeJS.ProcessEnv = process.env): { dir: string; bin: string; marker: string } {
	const dir = join(realmemHome(env), "core", packageVersion());
	return { dir, bin: join(dir, BIN_DIR, EXE), marker: join(dir, ".installed") };
}

function onPath(name: string, env: NodeJS.ProcessEnv): string | undefined {
	for (const dir of (env.PATH ?? "").split(delimiter)) {
		if (!dir) continue;
		const candidate = join(dir, name);
		try {
			accessSync(candidate, constants.X_OK);
			return candidate;
		} catch {
			// not here
		}
	}
	return undefined;
}

/** The core's executable, or undefined when it must be set up first. */
export function findCore(env: NodeJS.ProcessEnv = process.env, root = PACKAGE_ROOT): string | undefined {
	if (env.REALMEM_BIN) return env.REALMEM_BIN;
	const checkout = join(root, ".venv", BIN_DIR, EXE);
	if (existsSync(checkout)) return checkout;
	const installed = onPath(EXE, env);
	if (installed) return installed;
	const own = ownCore(env);
	return existsSync(own.marker) && existsSync(own.bin) ? own.bin : undefined;
}

/** Output of a command, or the error it failed with (its last stderr lines). */
function run(command: string, args: string[], env: NodeJS.ProcessEnv, onLine?: (line: string) => void): Promise<string> {
	return new Promise((resolvePromise, reject) => {
		const child = spawn(command, args, { env, stdio: ["ignore", "pipe", "pipe"] });
		let out = "";
		let err = "";
		child.stdout.on("data", (chunk: Buffer) => {
			out += chunk;
			if (onLine) for (const line of String(chunk).split("\n")) if (line.trim()) onLine(line.trim());
		});
		child.stderr.on("data", (chunk: Buffer) => {
			err += chunk;
		});
		child.once("error", reject);
		child.once("exit", (code) => {
			if (code === 0) resolvePromise(out);
			else reject(new Error(`${[command, ...args].join(" ")} exited with ${code}: ${err.trim().split("\n").slice(-3).join(" | ")}`));
		});
	});
}

/** A Python >= 3.11: REALMEM_PYTHON, else the newest python3.x on PATH, else python3. */
async function findPython(env: NodeJS.ProcessEnv): Promise<string> {
	const names = env.REALMEM_PYTHON ? [env.REALMEM_PYTHON] : ["python3.13", "python3.12", "python3.11", "python3"];
	const seen: string[] = [];
	for (const name of names) {
		try {
			const version = (await run(name, ["-c", "import sys; print('%d.%d' % sys.version_info[:2])"], env)).trim();
			const [major, minor] = version.split(".").map(Number);
			if (major > MIN_PYTHON[0] || (major === MIN_PYTHON[0] && minor >= MIN_PYTHON[1])) return name;
			seen.push(`${name} is ${version}`);
		} catch {
			// not installed under this name
		}
	}
	const none = env.REALMEM_PYTHON ? `REALMEM_PYTHON=${env.REALMEM_PYTHON} does not run` : "none found on PATH";
	const found = ` (${seen.length ? seen.join(", ") : none})`;
	throw new Error(
		`realmem's core needs Python >= ${MIN_PYTHON.join(".")}${found}. Install it, or set REALMEM_PYTHON to one, then restart Pi.`,
	);
}

/** Take the set-up lock (a directory: mkdir is atomic), waiting while another Pi holds it. */
async function lock(path: string, onProgress: (message: string) => void): Promise<() => Promise<void>> {
	await mkdir(dirname(path), { recursive: true });
	for (;;) {
		try {
			await mkdir(path);
			return () => rm(path, { recursive: true, force: true });
		} catch (error) {
			if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
			const age = Date.now() - (await stat(path).catch(() => ({ mtimeMs: Date.now() }))).mtimeMs;
			if (age > STALE_LOCK_MS) await rm(path, { recursive: true, force: true });
			else {
				onProgress("waiting for another Pi session that is setting up realmem's core");
				await new Promise((r) => setTimeout(r, 500));
			}
		}
	}
}

/**
 * The core's executable, set up first if needed. `onProgress` gets one short line per step (pip's
 * own lines while it installs). Throws with a message the user can act on.
 */
export async function ensureCore(env: NodeJS.ProcessEnv, onProgress: (message: string) => void, root = PACKAGE_ROOT): Promise<string> {
	const found = findCore(env, root);
	if (found) return found;
	const own = ownCore(env);
	const release = await lock(`${own.dir}.lock`, onProgress);
	try {
		if (existsSync(own.marker)) return own.bin; // another session finished it while we waited
		const python = await findPython(env);
		onProgress(`creating a virtual environment (${python}) in ${own.dir}`);
		await rm(own.dir, { recursive: true, force: true }); // a half-made one from a crash
		await run(python, ["-m", "venv", own.dir], env).catch((error: Error) => {
			throw new Error(`${error.message}. On Debian or Ubuntu, install python3-venv.`);
		});
		const pip = join(own.dir, BIN_DIR, "python");
		await run(pip, ["-m", "pip", "install", "--disable-pip-version-check", "--progress-bar", "off", root], env, (line) => {
			if (/^(Collecting|Building|Installing|Successfully)/.test(line)) onProgress(`pip: ${line.slice(0, 100)}`);
		});
		await writeFile(own.marker, `${JSON.stringify({ from: root, python, at: new Date().toISOString() })}\n`);
		return own.bin;
	} finally {
		await release();
	}
}
