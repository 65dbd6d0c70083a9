/**
 * Drives a real terminal program in tmux: a private tmux server (its own `-L` socket and no
 * user config) runs one session; tests type with send-keys and read the screen with
 * capture-pane, polling until the text they expect is drawn.
 *
 * The server is started with exactly the environment it is given, so the program in the pane
 * sees that environment (plus TERM and TMUX, which tmux sets) and nothing of the caller's.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** Fails (not skips) when tmux is missing: the terminal tests must run in CI. */
export function requireTmux(): string {
	const found = spawnSync("sh", ["-c", "command -v tmux"], { encoding: "utf8" });
	const path = found.stdout.trim();
	if (found.status !== 0 || !path) {
		throw new Error(
			"tmux is not installed, so the terminal tests (test-adapter/tmux.test.ts) cannot drive Pi. " +
				"Install it (Debian/Ubuntu: apt-get install -y tmux).",
		);
	}
	return path;
}

export interface TmuxOptions {
	/** Directory for the server's config file. */
	dir: string;
	cwd: string;
	env: Record<string, string>;
	/** The program and its arguments (run directly, not through a shell). */
	command: string[];
	width?: number;
	height?: number;
}

export class TmuxSession {
	readonly socket = `realmem-test-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
	readonly target = "main";
	private started = false;
	private readonly statusFile: string;

	constructor(private readonly o: TmuxOptions) {
		this.statusFile = join(o.dir, `${this.socket}.status`);
	}

	private tmux(...args: string[]): string {
		return execFileSync("tmux", ["-u", "-L", this.socket, ...args], {
			env: this.o.env,
			encoding: "utf8",
			stdio: ["ignore", "pipe", "pipe"],
		});
	}

	start(): void {
		const config = join(this.o.dir, "tmux.conf");
		// remain-on-exit: the pane stays (for capture-pane) after the program ends;
		// no status line, so the pane is the whole window.
		writeFileSync(config, ["set -g remain-on-exit on", "set -g status off", "set -g history-limit 2000", ""].join("\n"));
		execFileSync(
			"tmux",
			[
				"-u",
				"-L",
				this.socket,
				"-f",
				config,
				"new-session",
				"-d",
				"-s",
				this.target,
				"-x",
				String(this.o.width ?? 160),
				"-y",
				String(this.o.height ?? 45),
				"-c",
				this.o.cwd,
				"--",
				// the program runs in the pane's foreground; its exit status goes to a file
				"sh",
				"-c",
				'status="$1"; shift; "$@"; echo "$?" > "$status"',
				"sh",
				this.statusFile,
				...this.o.command,
			],
			{ env: this.o.env, stdio: ["ignore", "pipe", "pipe"] },
		);
		this.started = true;
	}

	/** Literal text, as typed. */
	type(text: string): void {
		this.tmux("send-keys", "-t", this.target, "-l", text);
	}

	/** Named keys (tmux names: Enter, Escape, Up, Down, BSpace, C-c, ...). */
	press(...keys: string[]): void {
		this.tmux("send-keys", "-t", this.target, ...keys);
	}

	/** The visible screen, one string, trailing blanks trimmed per line. */
	capture(): string {
		return this.tmux("capture-pane", "-p", "-t", this.target)
			.split("\n")
			.map((line) => line.trimEnd())
			.join("\n")
			.replace(/\n+$/, "");
	}

	/** `exit N` once the program has ended (128 + N: signal N), undefined while it runs. */
	exitStatus(): string | undefined {
		// tmux's own #{pane_dead_status} is not reliable here (tmux 3.3a sometimes never records
		// it), so the wrapping shell writes the status to a file.
		if (!existsSync(this.statusFile)) return undefined;
		const status = readFileSync(this.statusFile, "utf8").trim();
		return status ? `exit ${status}` : undefined;
	}

	async waitForExit(timeoutMs = 20_000): Promise<string> {
		const deadline = Date.now() + timeoutMs;
		for (;;) {
			const status = this.exitStatus();
			if (status) return status;
			if (Date.now() > deadline) throw new ScreenError(`timed out after ${timeoutMs} ms waiting for the program to exit`, this.capture());
			await new Promise((resolve) => setTimeout(resolve, 50));
		}
	}

	/**
	 * Polls the screen until `check` holds; returns the screen. On timeout the error carries the
	 * screen as last seen.
	 */
	async waitFor(what: string, check: (screen: string) => boolean, timeoutMs = 20_000): Promise<string> {
		const deadline = Date.now() + timeoutMs;
		for (;;) {
			const screen = this.capture();
			if (check(screen)) return screen;
			if (Date.now() > deadline) throw new ScreenError(`timed out after ${timeoutMs} ms waiting for ${what}`, screen);
			await new Promise((resolve) => setTimeout(resolve, 50));
		}
	}

	/** Waits for a pattern on the screen. */
	waitForText(pattern: RegExp | string, timeoutMs?: number): Promise<string> {
		const test = typeof pattern === "string" ? (s: string) => s.includes(pattern) : (s: string) => pattern.test(s);
		return this.waitFor(String(pattern), test, timeoutMs);
	}

	/** Waits until the pattern is no longer on the screen. */
	waitForGone(pattern: RegExp | string, timeoutMs?: number): Promise<string> {
		const test = typeof pattern === "string" ? (s: string) => !s.includes(pattern) : (s: string) => !pattern.test(s);
		return this.waitFor(`${String(pattern)} to go away`, test, timeoutMs);
	}

	/** Ends the server (and the program in it), waits for it to exit and removes its socket. */
	async kill(): Promise<void> {
		if (!this.started) return;
		this.started = false;
		let info = "";
		try {
			info = this.tmux("display-message", "-p", "#{pid} #{socket_path}").trim();
			this.tmux("kill-server");
		} catch {
			// already gone
		}
		const pid = Number(info.split(" ")[0]);
		if (pid) {
			const deadline = Date.now() + 3_000;
			while (isAlive(pid) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
			if (isAlive(pid)) await killAll([pid]);
		}
		const socket = info.slice(info.indexOf(" ") + 1);
		if (pid && socket) rmSync(socket, { force: true });
	}
}

/** An assertion failure that shows the screen it was looking at. */
export class ScreenError extends Error {
	constructor(
		message: string,
		readonly screen: string,
	) {
		super(`${message}\n--- screen ---\n${screen}\n--- end of screen ---`);
	}
}

/**
 * Pids of live processes whose environment has `NAME=value` (Linux /proc): what a test started
 * with its own temp REALMEM_HOME, e.g. the rpc child and the background worker.
 */
export function processesWithEnv(name: string, value: string): number[] {
	const needle = `${name}=${value}`;
	const pids: number[] = [];
	let entries: string[];
	try {
		entries = readdirSync("/proc");
	} catch {
		return pids;
	}
	for (const entry of entries) {
		if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
		try {
			const environ = readFileSync(`/proc/${entry}/environ`, "utf8").split("\0");
			if (environ.includes(needle)) pids.push(Number(entry));
		} catch {
			// gone, or not ours to read
		}
	}
	return pids;
}

/** SIGTERM, then SIGKILL for whatever is still alive after `graceMs`. */
export async function killAll(pids: number[], graceMs = 3_000): Promise<void> {
	for (const pid of pids) {
		try {
			process.kill(pid, "SIGTERM");
		} catch {
			// already gone
		}
	}
	const deadline = Date.now() + graceMs;
	while (pids.some(isAlive) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
	for (const pid of pids.filter(isAlive)) {
		try {
			process.kill(pid, "SIGKILL");
		} catch {
			// already gone
		}
	}
}

/** Whether the process runs (a zombie has exited; only its parent's wait() is missing). */
export function isAlive(pid: number): boolean {
	try {
		process.kill(pid, 0);
	} catch {
		return false;
	}
	try {
		return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
	} catch {
		return true;
	}
}
