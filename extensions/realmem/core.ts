/**
 * Typed facade over the rpc client: result shapes of docs/rpc.md, per-method timeouts, and the
 * one place that turns failures into text a user or model can act on.
 */
import { type CallOptions, RpcClient, RpcCode, RpcError } from "./rpc.js";
import { ensureCore, findCore } from "./setup.js";

export interface HelloResult {
	version: string;
	home: string;
	pid: number;
	hidden_tools: string[];
	path_notes: { maxFull: number; maxCaptions: number; charBudget: number };
}

export interface SessionStartResult {
	notification: string | null;
	level: "info" | "warning";
	project: { root: string; key: string } | null;
	queued: number;
	missing: number;
	gitignore: string | null;
	/** Imported context files realmem cuts from the prompt (Pi's startup list still shows them). */
	stripped?: string[];
}

export interface TextResult {
	text: string;
	details?: unknown;
}

export interface PathNotesResult {
	text: string | null;
	shown: string[];
	touched: string[];
}

export interface StripResult {
	system_prompt: string;
	stripped: string[];
}

export interface ImportBeginResult {
	prompt: string | null;
	files: string[];
	/** Already imported and unchanged: not imported again without --force. */
	skipped?: string[];
	text: string;
}

export interface ImportFinishResult {
	text: string;
	imported: string[];
	/** The next file's instruction, while files of this import remain. */
	prompt: string | null;
}

export interface GitignoreCheckResult {
	ignored: boolean;
	warning: string | null;
	fix: { file: string; lines: string[]; description: string } | null;
}

export interface CheckPathsResult {
	items: Array<{ path: string; absolute: string | null; kind: "file" | "dir" | "glob" | "missing" | "invalid"; warning: string | null }>;
	/** Paths that cannot be stored as typed (the screens ask again). */
	invalid: string[];
	/** Paths that name nothing yet (the screens ask before saving them). */
	warnings: string[];
}

/** Paths as typed in the add and manage screens: comma-separated, blanks dropped. */
export function splitPaths(value: string): string[] {
	return value
		.split(",")
		.map((path) => path.trim())
		.filter(Boolean);
}

/** Hidden tools when the core cannot say (it is down): the core's default of `hiddenTools`. */
export const DEFAULT_HIDDEN_TOOLS = ["ctx_memory"];

/**
 * Timeouts by method. The child serves requests on two threads, each one at a time in arrival
 * order: the quick methods (path notes after every tool call, prompt section, show, edit...) on
 * its main thread, the ones that may wait on the network or run long (remember, recall, debug,
 * retry, embed, reindex, consolidate, import_*, prune_paths, manage_list, settings_models,
 * settings_test) on a second one; a reader thread acts on cancel at once. A quick method waits
 * only behind other quick ones, so its short timeout catches a stuck core; a slow one may wait
 * behind another slow one. Long maintenance runs report progress and are cancelled by the
 * user, not by a clock.
 */
const TIMEOUTS: Record<string, number> = {
	hello: 15_000,
	session_start: 60_000,
	prompt_section: 15_000,
	strip_context_files: 10_000,
	path_notes: 5_000,
	recall: 60_000,
	remember: 180_000,
	forget: 30_000,
	list: 30_000,
	status: 30_000,
	import_begin: 60_000,
	import_finish: 180_000,
	prune_paths: 120_000,
	check_paths: 15_000,
	gitignore_check: 30_000,
	gitignore_fix: 30_000,
	consolidate: 0,
	embed: 0,
	reindex: 0,
	retry: 0,
};

export class Core {
	private client: RpcClient | undefined;
	private readonly env: NodeJS.ProcessEnv;
	private readonly cwd: string | undefined;

	constructor(options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}) {
		this.env = options.env ?? process.env;
		this.cwd = options.cwd;
	}

	/** Find the core for the calls to come; false when it must be set up first (see setup.ts). */
	locate(): boolean {
		if (!this.client) {
			const found = findCore(this.env);
			if (found) this.client = this.spawnClient(found);
		}
		return this.client !== undefined;
	}

	/** Set the core up (first use), reporting each step; throws a message the user can act on. */
	async setUp(onProgress: (message: string) => void): Promise<void> {
		try {
			this.client ??= this.spawnClient(await ensureCore(this.env, onProgress));
		} catch (error) {
			throw new RpcError(RpcCode.unavailable, `its Python core could not be set up: ${error instanceof Error ? error.message : String(error)}`);
		}
	}

	private spawnClient(command: string): RpcClient {
		return new RpcClient({ command, args: ["rpc"], env: this.env, cwd: this.cwd });
	}

	call<T>(method: string, params: Record<string, unknown> = {}, options: CallOptions = {}): Promise<T> {
		this.client ??= this.spawnClient(findCore(this.env) ?? "realmem");
		return this.client.call<T>(method, params, { timeoutMs: TIMEOUTS[method] ?? 30_000, ...options });
	}

	close(): Promise<void> {
		return this.client?.close() ?? Promise.resolve();
	}
}

/** A failure as one line: refusals and usage errors carry the core's user-facing message as is. */
export function describeError(error: unknown): string {
	if (error instanceof RpcError) {
		switch (error.code) {
			case RpcCode.refused:
			case RpcCode.usage:
				return error.message;
			case RpcCode.unavailable:
				return `realmem is unavailable: ${error.message}`;
			case RpcCode.timeout:
				return `realmem did not answer in time (${error.message})`;
			case RpcCode.internal:
				return `realmem internal error: ${error.message}`;
			default:
				return `realmem rpc error ${error.code}: ${error.message}`;
		}
	}
	return `realmem adapter error: ${error instanceof Error ? error.message : String(error)}`;
}

/** Whether the failure means the core is down (as opposed to refusing one request). */
export function isUnavailable(error: unknown): boolean {
	return error instanceof RpcError && (error.code === RpcCode.unavailable || error.code === RpcCode.timeout);
}
