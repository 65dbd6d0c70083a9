/**
 * realmem's Pi adapter: wires Pi's events, tools and commands to the Python core (`realmem rpc`).
 *
 * Thin by design: every memory decision and every model-visible text comes from the core. This
 * file only decides WHEN to call it (which Pi event), and keeps the little session state Pi
 * itself must carry (snapshot, shown notes) in the session file, where reload, resume, fork and
 * tree navigation find it.
 *
 * No handler ever throws into Pi: when the core is missing or broken, Pi keeps working without
 * memory, tools answer with an error text, and the user is told once.
 */
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { type ExtensionAPI, type ExtensionContext, type ToolResultEvent, VERSION } from "@earendil-works/pi-coding-agent";
import { ModelBridge } from "./bridge.js";
import { registerCommand } from "./commands.js";
import {
	Core,
	DEFAULT_HIDDEN_TOOLS,
	describeError,
	type HelloResult,
	type ImportFinishResult,
	type PathNotesResult,
	type SessionStartResult,
	type StripResult,
	type TextResult,
} from "./core.js";
import {
	findSnapshot,
	RecentPaths,
	SHOWN_ENTRY,
	SNAPSHOT_ENTRY,
	type ShownData,
	type SnapshotData,
	shownIdsOnBranch,
} from "./session.js";
import { registerTools } from "./tools.js";

const SKILL_FILE = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "skills", "realmem", "SKILL.md");

/** Per extension instance: Pi creates a new one for every session (start, reload, resume, fork). */
export class Realmem {
	readonly core: Core;
	private hidden = new Set<string>(DEFAULT_HIDDEN_TOOLS);
	private hello: HelloResult | undefined;
	/** Notes the model can still see on this branch (from realmem-shown entries). */
	private branchShown = new Set<string>();
	/** Notes shown in the current turn, written as one realmem-shown entry at turn end. */
	private pendingShown = new Map<string, Set<string>>();
	private readonly recent = new RecentPaths(20);
	/** Path-note calls run one after another so each sees the ids the previous one showed. */
	private notesChain: Promise<unknown> = Promise.resolve();
	private bridge: ModelBridge | undefined;
	private background: Promise<void> = Promise.resolve();
	/** The latest context; its getters read live state (current model) for the bridge. */
	private ctx: ExtensionContext | undefined;
	private warned = false;
	private importPending = false;
	private shutDown = false;

	constructor(readonly pi: ExtensionAPI) {
		this.core = new Core();
	}

	recentPaths(): string[] {
		return this.recent.list();
	}

	/** Tell the user once per session that memory is off; repeated tool errors say it anyway. */
	warnOnce(ctx: ExtensionContext, error: unknown): void {
		if (this.warned) return;
		this.warned = true;
		ctx.ui.notify(`${describeError(error).replace(/\.$/, "")}. Pi works on without long-term memory.`, "warning");
	}

	async onSessionStart(ctx: ExtensionContext): Promise<void> {
		this.ctx = ctx;
		this.rebuildShown(ctx);
		// Hidden tools go first and are awaited: the first prompt's system prompt is built from
		// the active tool set, and it must not change later in the session (prompt cache).
		try {
			if (!this.core.locate()) await this.setUpCore(ctx);
			this.hello = await this.core.call<HelloResult>("hello");
			this.hidden = new Set(this.hello.hidden_tools);
		} catch (error) {
			this.warnOnce(ctx, error);
		}
		this.applyHiddenTools();
		if (!this.hello) return;
		// The rest may take a moment (store scan, worker start) and needs no ordering with the
		// user: the child answers quick methods in order on one thread (session_start and
		// prompt_section are both quick), so the first prompt_section comes after it.
		this.background = this.startBackground(ctx, this.hello);
	}

	/** First use: the Python core is set up once (a minute or two), with each step shown. */
	private async setUpCore(ctx: ExtensionContext): Promise<void> {
		ctx.ui.notify("realmem: setting up its Python core (first use; this takes a minute or two)...", "info");
		try {
			await this.core.setUp((message) => ctx.ui.setStatus("realmem", `realmem setup: ${message}`));
		} finally {
			ctx.ui.setStatus("realmem", undefined);
		}
		ctx.ui.notify("realmem: the Python core is set up.", "info");
	}

	private async startBackground(ctx: ExtensionContext, hello: HelloResult): Promise<void> {
		try {
			const started = await this.core.call<SessionStartResult>("session_start", {
				cwd: ctx.cwd,
				session: ctx.sessionManager.getSessionId(),
			});
			if (started.notification) ctx.ui.notify(started.notification, started.level === "warning" ? "warning" : "info");
		} catch (error) {
			this.warnOnce(ctx, error);
			return;
		}
		try {
			const bridge = await ModelBridge.start(
				{
					model: () => this.ctx?.model,
					registry: () => this.ctx?.modelRegistry,
				},
				{ home: hello.home },
			);
			if (this.shutDown) {
				await bridge.close();
				return;
			}
			// The core finds the bridge through its 0600 file in REALMEM_HOME (docs/rpc.md).
			this.bridge = bridge;
		} catch (error) {
			// Rewrites then use the configured endpoint or the deterministic fallback.
			ctx.ui.notify(`realmem: Pi model bridge unavailable (${describeError(error)})`, "warning");
		}
	}

	private applyHiddenTools(): void {
		const active = this.pi.getActiveTools();
		const kept = active.filter((name) => !this.hidden.has(name));
		if (kept.length !== active.length) this.pi.setActiveTools(kept);
	}

	isHidden(toolName: string): boolean {
		return this.hidden.has(toolName);
	}

	rebuildShown(ctx: ExtensionContext): void {
		this.branchShown = shownIdsOnBranch(ctx.sessionManager.getBranch());
	}

	/**
	 * System prompt = Pi's prompt minus imported context files, plus the session's snapshot of
	 * the <realmem> section. Both the section and the set of stripped files are decided once per
	 * branch and stored, so the result is byte-identical on every turn, after reload and on
	 * resume; an import during the session takes effect from the next session on.
	 */
	async systemPrompt(ctx: ExtensionContext, systemPrompt: string, contextFiles: Array<{ path: string; content: string }>) {
		this.ctx = ctx;
		const files = contextFiles.map(({ path, content }) => ({ path, content }));
		const stored = findSnapshot(ctx.sessionManager.getBranch());
		if (stored) {
			const base = await this.strip(ctx, systemPrompt, files, stored.stripped);
			return stored.text ? `${base}\n\n${stored.text}` : base;
		}
		let text: string;
		try {
			text = (await this.core.call<TextResult>("prompt_section", { cwd: ctx.cwd })).text;
		} catch (error) {
			// No snapshot stored: the next prompt tries again.
			this.warnOnce(ctx, error);
			return undefined;
		}
		let base = systemPrompt;
		let stripped: string[] = [];
		try {
			const result = await this.stripCall(ctx, systemPrompt, files);
			base = result.system_prompt;
			stripped = result.stripped;
		} catch (error) {
			// Keeping an imported AGENTS.md is harmless; losing the memory section is not.
			this.warnOnce(ctx, error);
		}
		this.pi.appendEntry<SnapshotData>(SNAPSHOT_ENTRY, { text, stripped });
		return text ? `${base}\n\n${text}` : base;
	}

	/** Cut the files this session strips (`only`; undefined: an old entry, ask the core). */
	private async strip(
		ctx: ExtensionContext,
		systemPrompt: string,
		files: Array<{ path: string; content: string }>,
		only: string[] | undefined,
	): Promise<string> {
		if (only?.length === 0) return systemPrompt;
		try {
			return (await this.stripCall(ctx, systemPrompt, files, only)).system_prompt;
		} catch (error) {
			this.warnOnce(ctx, error);
			return systemPrompt;
		}
	}

	private stripCall(
		ctx: ExtensionContext,
		systemPrompt: string,
		files: Array<{ path: string; content: string }>,
		only?: string[],
	): Promise<StripResult> {
		return this.core.call<StripResult>("strip_context_files", {
			cwd: ctx.cwd,
			system_prompt: systemPrompt,
			context_files: files,
			...(only ? { only } : {}),
		});
	}

	/** Append path notes for the paths this tool call touched (serialised, see notesChain). */
	pathNotes(event: ToolResultEvent, ctx: ExtensionContext) {
		const run = this.notesChain.then(() => this.pathNotesNow(event, ctx));
		this.notesChain = run.catch(() => undefined);
		return run;
	}

	private async pathNotesNow(event: ToolResultEvent, ctx: ExtensionContext) {
		const shown = new Set(this.branchShown);
		for (const ids of this.pendingShown.values()) for (const id of ids) shown.add(id);
		let result: PathNotesResult;
		try {
			result = await this.core.call<PathNotesResult>("path_notes", {
				cwd: ctx.cwd,
				session: ctx.sessionManager.getSessionId(),
				tool_name: event.toolName,
				input: event.input,
				shown: [...shown],
				is_error: event.isError,
			});
		} catch (error) {
			this.warnOnce(ctx, error);
			return undefined;
		}
		this.recent.add(result.touched ?? []);
		if (result.shown?.length) {
			const forCall = this.pendingShown.get(event.toolCallId) ?? new Set<string>();
			for (const id of result.shown) forCall.add(id);
			this.pendingShown.set(event.toolCallId, forCall);
		}
		if (!result.text) return undefined;
		return { content: [...event.content, { type: "text" as const, text: result.text }] };
	}

	/** Persist this turn's shown ids (one entry per turn keeps the session file small). */
	async flushShown(): Promise<void> {
		await this.notesChain;
		if (this.pendingShown.size === 0) return;
		const calls: Record<string, string[]> = {};
		const ids = new Set<string>();
		for (const [toolCallId, callIds] of this.pendingShown) {
			calls[toolCallId] = [...callIds];
			for (const id of callIds) ids.add(id);
		}
		this.pendingShown.clear();
		for (const id of ids) this.branchShown.add(id);
		this.pi.appendEntry<ShownData>(SHOWN_ENTRY, { ids: [...ids], calls });
	}

	/** /realmem import: the agent run that follows the instruction decides what was imported. */
	beginImport(): void {
		this.importPending = true;
	}

	async finishImportIfPending(ctx: ExtensionContext): Promise<void> {
		if (!this.importPending) return;
		this.importPending = false;
		try {
			const result = await this.core.call<ImportFinishResult>("import_finish", {
				cwd: ctx.cwd,
				session: ctx.sessionManager.getSessionId(),
			});
			ctx.ui.notify(result.text, "info");
			// One file a run, so each file counts as imported only by the facts stored from it.
			if (result.prompt) {
				this.importPending = true;
				this.pi.sendUserMessage(result.prompt, { deliverAs: "followUp" });
			}
		} catch (error) {
			ctx.ui.notify(describeError(error), "error");
		}
	}

	async shutdown(): Promise<void> {
		this.shutDown = true;
		try {
			await this.flushShown();
		} catch {
			// The session may already be read-only while Pi tears down; the notes are then shown again.
		}
		await this.background.catch(() => undefined);
		const bridge = this.bridge;
		this.bridge = undefined;
		await Promise.allSettled([bridge?.close(), this.core.close()]);
		this.ctx = undefined;
	}
}

/** What the model gets for any call to a hidden memory tool (blocked or not found). */
export function hiddenToolMessage(toolName: string): string {
	return `${toolName} is disabled: realmem is this session's memory system; use realmem_recall / realmem_remember`;
}

/** The oldest Pi realmem is tested with (package.json pins it for the tests). */
export const MIN_PI_VERSION = "1.6.0";

function older(version: string, than: string): boolean {
	const parse = (v: string) => v.split(/[.+-]/).slice(0, 3).map((part) => Number.parseInt(part, 10) || 0);
	const [a, b] = [parse(version), parse(than)];
	for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return a[i] < b[i];
	return false;
}

/**
 * Refuse to load on a Pi older than MIN_PI_VERSION, saying what to do: it lacks APIs realmem
 * calls (ctx.modelRegistry.complete, system prompt sections), which would fail later and
 * obscurely. A 0.x Pi (@mariozechner) does not map @earendil-works imports to itself, so
 * VERSION may come from another copy: its ExtensionAPI, which lacks registerToolRenderer, tells.
 */
export function assertSupportedPi(pi: ExtensionAPI, version: string = VERSION): void {
	const host = typeof pi.registerToolRenderer === "function" ? version : "0.x";
	if (host !== "0.x" && !older(host, MIN_PI_VERSION)) return;
	throw new Error(
		`realmem needs Pi ${MIN_PI_VERSION} or newer (@earendil-works/pi-coding-agent); this Pi is ${host}. ` +
			`Update it: npm install -g @earendil-works/pi-coding-agent@latest`,
	);
}

/** Run a handler without ever throwing into Pi; failures become one notification. */
function guard<E, R>(
	realmem: Realmem,
	handler: (event: E, ctx: ExtensionContext) => Promise<R | undefined> | R | undefined,
): (event: E, ctx: ExtensionContext) => Promise<R | undefined> {
	return async (event, ctx) => {
		try {
			return await handler(event, ctx);
		} catch (error) {
			realmem.warnOnce(ctx, error);
			return undefined;
		}
	};
}

export default function realmemExtension(pi: ExtensionAPI): void {
	assertSupportedPi(pi);
	const realmem = new Realmem(pi);

	registerTools(pi, { core: realmem.core, recentPaths: () => realmem.recentPaths() });
	registerCommand(pi, realmem);

	pi.on(
		"session_start",
		guard(realmem, (_event, ctx) => realmem.onSessionStart(ctx)),
	);

	// Skill for `pi -e` and settings "extensions" use; a package install also lists it in the
	// manifest, and Pi loads the same file only once.
	pi.on("resources_discover", () => ({ skillPaths: [SKILL_FILE] }));

	pi.on(
		"before_agent_start",
		guard(realmem, async (event, ctx) => {
			const systemPrompt = await realmem.systemPrompt(
				ctx,
				event.systemPrompt,
				event.systemPromptOptions.contextFiles ?? [],
			);
			return systemPrompt === undefined ? undefined : { systemPrompt };
		}),
	);

	pi.on("tool_call", (event) => {
		if (!realmem.isHidden(event.toolName)) return undefined;
		return { block: true, reason: hiddenToolMessage(event.toolName) };
	});

	// A call to a hidden (deactivated) tool never reaches tool_call: Pi answers "Tool X not found"
	// itself. Rewrite that answer in the copy the model gets, identically every time, so the
	// prompt prefix stays byte-stable for the cache. Pi's own line stays in the user's view, so
	// the user is told once per call what the model was told instead.
	const told = new Set<string>();
	pi.on("context", (event, ctx) => {
		let changed = false;
		const messages = event.messages.map((message) => {
			if (message.role !== "toolResult" || !message.isError || !realmem.isHidden(message.toolName)) return message;
			const text = message.content.map((part) => (part.type === "text" ? part.text : "")).join("");
			if (text !== `Tool ${message.toolName} not found`) return message;
			changed = true;
			if (!told.has(message.toolCallId)) {
				told.add(message.toolCallId);
				ctx.ui.notify(`realmem: the model was told: ${hiddenToolMessage(message.toolName)}`, "info");
			}
			return { ...message, content: [{ type: "text" as const, text: hiddenToolMessage(message.toolName) }] };
		});
		return changed ? { messages } : undefined;
	});

	pi.on(
		"tool_result",
		guard(realmem, (event, ctx) => realmem.pathNotes(event, ctx)),
	);

	pi.on(
		"turn_end",
		guard(realmem, () => realmem.flushShown()),
	);

	pi.on(
		"agent_end",
		guard(realmem, async (_event, ctx): Promise<void> => {
			// turn_end normally flushed already; an aborted run may skip it.
			await realmem.flushShown();
			await realmem.finishImportIfPending(ctx);
		}),
	);

	// Branch moves and compaction change which notes the model can still see.
	pi.on(
		"session_tree",
		guard(realmem, (_event, ctx) => realmem.rebuildShown(ctx)),
	);
	pi.on(
		"session_compact",
		guard(realmem, (_event, ctx) => realmem.rebuildShown(ctx)),
	);

	pi.on("session_shutdown", async () => {
		await realmem.shutdown().catch(() => undefined);
	});
}
