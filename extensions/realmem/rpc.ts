/**
 * JSON-RPC 2.0 client for the Python core (`realmem rpc`), one JSON object per line over stdio.
 *
 * The contract lives in docs/rpc.md. This module knows nothing about memory: it only moves
 * requests, responses and progress notifications, and keeps the child alive. The child is
 * spawned lazily on the first call and again on the first call after it died, so a crash
 * costs one failed request at most and never takes Pi down.
 */
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { createInterface } from "node:readline";

/** Error codes of docs/rpc.md, plus the adapter-side ones (negative, outside the JSON-RPC range). */
export const RpcCode = {
	refused: 1,
	usage: 2,
	internal: 3,
	/** The child could not be started or died while the request was in flight. */
	unavailable: -1,
	/** No answer within the request's timeout. */
	timeout: -2,
} as const;

export class RpcError extends Error {
	readonly code: number;
	readonly data: unknown;
	constructor(code: number, message: string, data?: unknown) {
		super(message);
		this.name = "RpcError";
		this.code = code;
		this.data = data;
	}
}

export interface Progress {
	token: string;
	message?: string;
	done?: number;
	total?: number;
}

export interface CallOptions {
	/** Milliseconds before the call fails with RpcCode.timeout. 0 waits forever. */
	timeoutMs?: number;
	/** Receives the child's progress notifications; requires `progressToken` in params. */
	onProgress?: (progress: Progress) => void;
	/** Aborting sends `cancel` for the request's progress token; the child then answers `cancelled`. */
	signal?: AbortSignal;
}

export interface RpcClientOptions {
	command: string;
	args?: string[];
	env?: NodeJS.ProcessEnv;
	cwd?: string;
	/** Default per-request timeout. */
	timeoutMs?: number;
	/** After a failed start, calls fail fast for this long instead of respawning each time. */
	restartBackoffMs?: number;
}

interface Pending {
	method: string;
	resolve: (value: unknown) => void;
	reject: (error: RpcError) => void;
	timer?: NodeJS.Timeout;
	progressToken?: string;
	cleanup: () => void;
}

const STDERR_TAIL_LINES = 20;

export class RpcClient {
	private readonly opts: RpcClientOptions;
	private child: ChildProcessWithoutNullStreams | undefined;
	private readonly pending = new Map<number, Pending>();
	private readonly progressHandlers = new Map<string, (progress: Progress) => void>();
	private nextId = 1;
	private stderrTail: string[] = [];
	private lastStartFailure: { at: number; error: RpcError } | undefined;
	private closed = false;
	private readonly onProcessExit = () => this.kill();

	constructor(opts: RpcClientOptions) {
		this.opts = opts;
	}

	/** Last lines the child wrote to stderr (its structlog output), for error reports. */
	get stderr(): string[] {
		return [...this.stderrTail];
	}

	get running(): boolean {
		return this.child !== undefined;
	}

	call<T = unknown>(method: string, params: Record<string, unknown> = {}, options: CallOptions = {}): Promise<T> {
		if (this.closed) return Promise.reject(new RpcError(RpcCode.unavailable, "realmem core is shut down"));
		let child: ChildProcessWithoutNullStreams;
		try {
			child = this.ensureChild();
		} catch (error) {
			return Promise.reject(error);
		}
		const id = this.nextId++;
		const progressToken = typeof params.progress_token === "string" ? params.progress_token : undefined;
		return new Promise<T>((resolvePromise, rejectPromise) => {
			const onAbort = () => {
				// The child answers the cancelled request itself (error `cancelled`), so the promise
				// settles only when it has really stopped and written nothing.
				if (progressToken) this.notify("cancel", { token: progressToken });
			};
			const entry: Pending = {
				method,
				resolve: resolvePromise as (value: unknown) => void,
				reject: rejectPromise,
				progressToken,
				cleanup: () => {
					if (entry.timer) clearTimeout(entry.timer);
					if (progressToken) this.progressHandlers.delete(progressToken);
					options.signal?.removeEventListener("abort", onAbort);
				},
			};
			const timeoutMs = options.timeoutMs ?? this.opts.timeoutMs ?? 30_000;
			if (timeoutMs > 0) {
				entry.timer = setTimeout(() => {
					if (!this.pending.delete(id)) return;
					entry.cleanup();
					// The child works through requests in order (on its quick or its slow thread), so it may still answer later;
					// that late answer is dropped because the id is no longer pending.
					rejectPromise(new RpcError(RpcCode.timeout, `realmem ${method} timed out after ${timeoutMs} ms`));
				}, timeoutMs);
				entry.timer.unref?.();
			}
			if (progressToken && options.onProgress) this.progressHandlers.set(progressToken, options.onProgress);
			if (options.signal) {
				if (options.signal.aborted) onAbort();
				else options.signal.addEventListener("abort", onAbort, { once: true });
			}
			this.pending.set(id, entry);
			const line = `${JSON.stringify({ jsonrpc: "2.0", id, method, params })}\n`;
			child.stdin.write(line, (error) => {
				if (error && this.pending.delete(id)) {
					entry.cleanup();
					rejectPromise(this.unavailable(`could not write to realmem rpc: ${error.message}`));
				}
			});
		});
	}

	/** Send a notification (no answer expected). Used for `cancel`. */
	notify(method: string, params: Record<string, unknown>): void {
		const child = this.child;
		if (!child) return;
		child.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", method, params })}\n`);
	}

	/**
	 * Stop the child: close stdin (the documented way to end it), then SIGTERM and SIGKILL if
	 * it lingers. Pending requests fail with RpcCode.unavailable.
	 */
	async close(graceMs = 2000): Promise<void> {
		this.closed = true;
		const child = this.child;
		if (!child) return;
		const exited = new Promise<void>((done) => child.once("exit", () => done()));
		child.stdin.end();
		const term = setTimeout(() => child.kill("SIGTERM"), graceMs);
		const kill = setTimeout(() => child.kill("SIGKILL"), graceMs * 2);
		await exited;
		clearTimeout(term);
		clearTimeout(kill);
	}

	/** Synchronous last resort for process exit: no time to wait for a graceful stop. */
	kill(): void {
		this.child?.kill("SIGKILL");
	}

	private ensureChild(): ChildProcessWithoutNullStreams {
		if (this.child) return this.child;
		const backoff = this.opts.restartBackoffMs ?? 3000;
		if (this.lastStartFailure && Date.now() - this.lastStartFailure.at < backoff) throw this.lastStartFailure.error;
		const command = this.opts.command;
		const env = {
			...(this.opts.env ?? process.env),
			// The line protocol needs every answer flushed at once, whatever the core's own setup.
			PYTHONUNBUFFERED: "1",
			PYTHONIOENCODING: "utf-8",
		};
		const child = spawn(command, [...(this.opts.args ?? ["rpc"])], {
			cwd: this.opts.cwd,
			env,
			stdio: ["pipe", "pipe", "pipe"],
			windowsHide: true,
		});
		this.child = child;
		this.stderrTail = [];
		child.stdin.on("error", () => {
			// EPIPE after the child died; the exit handler reports it.
		});
		createInterface({ input: child.stdout, crlfDelay: Infinity }).on("line", (line) => this.onLine(line));
		createInterface({ input: child.stderr, crlfDelay: Infinity }).on("line", (line) => {
			this.stderrTail.push(line);
			if (this.stderrTail.length > STDERR_TAIL_LINES) this.stderrTail.shift();
		});
		child.once("error", (error: NodeJS.ErrnoException) => {
			const reason =
				error.code === "ENOENT"
					? `realmem core not found (${command}). Restart Pi to set it up, or set REALMEM_BIN.`
					: `realmem core could not start (${command}): ${error.message}`;
			this.onChildGone(child, this.unavailable(reason), true);
		});
		child.once("exit", (code, signal) => {
			const tail = this.lastStderrLine();
			const how = signal ? `signal ${signal}` : `code ${code}`;
			this.onChildGone(child, this.unavailable(`realmem core exited (${how})${tail ? `: ${tail}` : ""}`), false);
		});
		process.once("exit", this.onProcessExit);
		return child;
	}

	private onChildGone(child: ChildProcessWithoutNullStreams, error: RpcError, startFailed: boolean): void {
		if (this.child !== child) return;
		this.child = undefined;
		process.removeListener("exit", this.onProcessExit);
		if (startFailed) this.lastStartFailure = { at: Date.now(), error };
		for (const [id, entry] of this.pending) {
			this.pending.delete(id);
			entry.cleanup();
			entry.reject(error);
		}
	}

	private onLine(line: string): void {
		if (!line.trim()) return;
		let message: {
			id?: number | string | null;
			method?: string;
			params?: Record<string, unknown>;
			result?: unknown;
			error?: { code: number; message: string; data?: unknown };
		};
		try {
			message = JSON.parse(line);
		} catch {
			// Not ours to interpret: the core promises JSON only on stdout. Keep it for diagnostics.
			this.stderrTail.push(`(stdout) ${line}`);
			return;
		}
		if (message.method === "progress" && message.params) {
			const token = message.params.token;
			if (typeof token === "string") this.progressHandlers.get(token)?.(message.params as unknown as Progress);
			return;
		}
		if (typeof message.id !== "number") return;
		const entry = this.pending.get(message.id);
		if (!entry) return;
		this.pending.delete(message.id);
		entry.cleanup();
		if (message.error) {
			entry.reject(new RpcError(message.error.code, message.error.message, message.error.data));
		} else {
			entry.resolve(message.result);
		}
	}

	private unavailable(message: string): RpcError {
		return new RpcError(RpcCode.unavailable, message);
	}

	private lastStderrLine(): string | undefined {
		for (let i = this.stderrTail.length - 1; i >= 0; i--) {
			const line = this.stderrTail[i].trim();
			if (!line) continue;
			// structlog writes JSON; its `event` field is the human-readable part.
			try {
				const parsed = JSON.parse(line) as { event?: unknown };
				if (typeof parsed.event === "string") return parsed.event;
			} catch {
				// plain text line (e.g. a Python traceback's last line)
			}
			return line;
		}
		return undefined;
	}
}
