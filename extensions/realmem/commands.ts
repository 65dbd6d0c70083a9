/**
 * /realmem: the user's maintenance surface. Each subcommand is one or two rpc calls; results are
 * the core's rendered `text`, shown as notifications. The TUI screens (manage, settings, debug)
 * live in ./tui; this file only wires them in as subcommands.
 */
import { randomUUID } from "node:crypto";
import {
	BorderedLoader,
	type ExtensionAPI,
	type ExtensionCommandContext,
	type ExtensionContext,
} from "@earendil-works/pi-coding-agent";
import type { AutocompleteItem } from "@earendil-works/pi-tui";
import {
	type CheckPathsResult,
	describeError,
	type GitignoreCheckResult,
	type ImportBeginResult,
	splitPaths,
	type TextResult,
} from "./core.js";
import type { Realmem } from "./index.js";
import { RpcError } from "./rpc.js";
import { type CoreCall, openDebug, openManage, openSettings } from "./tui/index.js";

interface Subcommand {
	name: string;
	description: string;
	run(realmem: Realmem, args: string[], ctx: ExtensionCommandContext): Promise<void>;
}

const STORES = ["global", "shared", "personal"];

function base(ctx: ExtensionContext): { cwd: string; session: string } {
	return { cwd: ctx.cwd, session: ctx.sessionManager.getSessionId() };
}

function show(ctx: ExtensionContext, text: string, level: "info" | "warning" | "error" = "info"): void {
	ctx.ui.notify(text, level);
}

/**
 * A long maintenance run: progress in the footer status, Esc (through a loader) sends `cancel`
 * for the run's progress token. The core only sees the cancel at its next progress step (a judge
 * request may be in flight), so the footer says "cancelling…" at once and ignores the progress
 * still on its way; `cancelled` says what a cancelled run left behind. The rpc call is awaited
 * directly, so modes without custom UI (RPC, print) still get the result.
 */
async function runLong(
	realmem: Realmem,
	ctx: ExtensionCommandContext,
	run: { title: string; method: string; params: Record<string, unknown>; cancelled: string },
): Promise<void> {
	const { title, method, params } = run;
	const label = `realmem ${title.toLowerCase()}`;
	const token = randomUUID();
	const abort = new AbortController();
	let closeLoader: (() => void) | undefined;
	let finished = false;
	if (ctx.hasUI) {
		void ctx.ui
			.custom<void>((tui, theme, _keybindings, done) => {
				const loader = new BorderedLoader(tui, theme, `${title} (esc cancels)`);
				loader.onAbort = () => {
					if (!finished) ctx.ui.setStatus("realmem", `${label}: cancelling…`);
					abort.abort();
					done();
				};
				closeLoader = () => done();
				if (finished) done();
				return loader;
			})
			.catch(() => undefined);
	}
	try {
		const result = await realmem.core.call<TextResult>(
			method,
			{ ...params, progress_token: token },
			{
				signal: abort.signal,
				onProgress: (progress) => {
					if (abort.signal.aborted) return;
					const count = progress.total ? ` ${progress.done ?? 0}/${progress.total}` : "";
					ctx.ui.setStatus("realmem", `${label}:${count} ${progress.message ?? ""}`.trim());
				},
			},
		);
		// A cancel that came after the core's last check: the run finished and its report stands.
		show(ctx, result.text);
	} catch (error) {
		if (abort.signal.aborted && error instanceof RpcError && error.message === "cancelled") show(ctx, `${title}: ${run.cancelled}`);
		else show(ctx, describeError(error), abort.signal.aborted ? "info" : "error");
	} finally {
		finished = true;
		closeLoader?.();
		ctx.ui.setStatus("realmem", undefined);
	}
}

async function simple(realmem: Realmem, ctx: ExtensionContext, method: string, params: Record<string, unknown>) {
	try {
		const result = await realmem.core.call<TextResult>(method, params);
		show(ctx, result.text);
	} catch (error) {
		show(ctx, describeError(error), "error");
	}
}

/**
 * The optional paths step of /realmem add: files, directories or globs, checked by the core. An
 * invalid path asks again; paths that name nothing yet are kept only after a confirm. Undefined:
 * the user cancelled the add.
 */
async function askPaths(realmem: Realmem, ctx: ExtensionContext): Promise<string[] | undefined> {
	for (;;) {
		const typed = await ctx.ui.input(
			"Paths (optional): files, directories or globs, comma-separated",
			"e.g. src/db, migrations/*.sql · empty: the whole project (or everywhere for global)",
		);
		if (typed === undefined) return undefined;
		const paths = splitPaths(typed);
		if (!paths.length) return [];
		let check: CheckPathsResult;
		try {
			check = await realmem.core.call<CheckPathsResult>("check_paths", { cwd: ctx.cwd, paths });
		} catch (error) {
			show(ctx, describeError(error), "error");
			return undefined;
		}
		if (check.invalid.length) {
			show(ctx, `Not a usable path: ${check.invalid.join("; ")}`, "warning");
			continue;
		}
		if (!check.warnings.length) return paths;
		if (await ctx.ui.confirm("Some paths do not exist", `${check.warnings.join("\n")}\n\nKeep them anyway?`)) return paths;
	}
}

function coreCall(realmem: Realmem): CoreCall {
	return (method, params, options) => realmem.core.call(method, params, options);
}

const SUBCOMMANDS: Subcommand[] = [
	{
		name: "status",
		description: "counts, queue, worker, endpoints and warnings",
		run: (realmem, _args, ctx) => simple(realmem, ctx, "status", { cwd: ctx.cwd }),
	},
	{
		name: "add",
		description: "remember a fact yourself (caption, content, scope, paths)",
		async run(realmem, _args, ctx) {
			if (!ctx.hasUI) return show(ctx, "/realmem add needs the interactive UI", "warning");
			const caption = (await ctx.ui.input("Memory caption (one line)", "e.g. Run e2e tests with pnpm test:e2e"))?.trim();
			if (!caption) return;
			const content = (await ctx.ui.editor("Memory content: the fact, with exact commands", ""))?.trim();
			if (!content) return;
			const scope = await ctx.ui.select("Scope", ["(let realmem decide)", ...STORES]);
			if (scope === undefined) return;
			const paths = await askPaths(realmem, ctx);
			if (paths === undefined) return;
			await simple(realmem, ctx, "remember", {
				...base(ctx),
				caption,
				content,
				user_requested: true,
				...(STORES.includes(scope) ? { scope } : {}),
				...(paths.length ? { paths } : {}),
			});
		},
	},
	{
		name: "import",
		description: "the agent splits AGENTS.md / CLAUDE.md into memories: [file ...] [--force]",
		async run(realmem, args, ctx) {
			// The import is judged by what the agent run stores, so it must be the only run.
			await ctx.waitForIdle();
			const files = args.filter((arg) => arg !== "--force");
			let begun: ImportBeginResult;
			try {
				begun = await realmem.core.call<ImportBeginResult>("import_begin", {
					...base(ctx),
					...(files.length ? { files } : {}),
					force: args.includes("--force"),
				});
			} catch (error) {
				return show(ctx, describeError(error), "error");
			}
			if (!begun.prompt) return show(ctx, begun.text);
			show(ctx, begun.text);
			realmem.beginImport();
			realmem.pi.sendUserMessage(begun.prompt);
		},
	},
	{
		name: "manage",
		description: "browse, search, edit, re-scope, delete and approve memories: [query]",
		run: (realmem, args, ctx) => openManage(ctx, coreCall(realmem), args.join(" ")),
	},
	{
		name: "settings",
		description: "endpoints, keys, models, thresholds and limits; connection tests",
		run: (realmem, _args, ctx) => openSettings(ctx, coreCall(realmem)),
	},
	{
		name: "debug",
		description: "dry-run the remember path for a candidate and show the trace (w writes it)",
		run: (realmem, _args, ctx) => openDebug(ctx, coreCall(realmem)),
	},
	{
		name: "prune-paths",
		description: "drop paths that no longer exist (after a confirm)",
		async run(realmem, _args, ctx) {
			let plan: TextResult & { details?: { changes?: unknown } };
			try {
				plan = await realmem.core.call("prune_paths", { ...base(ctx), apply: false });
			} catch (error) {
				return show(ctx, describeError(error), "error");
			}
			const changes = plan.details?.changes;
			if (Array.isArray(changes) && changes.length === 0) return show(ctx, plan.text);
			if (!(await ctx.ui.confirm("Prune memory paths?", plan.text))) return show(ctx, "Nothing changed.");
			await simple(realmem, ctx, "prune_paths", { ...base(ctx), apply: true });
		},
	},
	{
		name: "fix-gitignore",
		description: "make git share .pi/realmem (verified fix, after a confirm)",
		async run(realmem, _args, ctx) {
			let check: GitignoreCheckResult;
			try {
				check = await realmem.core.call<GitignoreCheckResult>("gitignore_check", { cwd: ctx.cwd });
			} catch (error) {
				return show(ctx, describeError(error), "error");
			}
			if (!check.ignored) return show(ctx, "Shared memories (.pi/realmem) are not ignored by git; nothing to fix.");
			if (!check.fix) return show(ctx, `${check.warning ?? "The shared store is ignored by git."} No verified fix found.`, "warning");
			const detail = [check.warning, check.fix.description, `Append to ${check.fix.file}:`, ...check.fix.lines]
				.filter(Boolean)
				.join("\n");
			if (!(await ctx.ui.confirm("Fix .gitignore?", detail))) return show(ctx, "Nothing changed.");
			await simple(realmem, ctx, "gitignore_fix", { cwd: ctx.cwd });
		},
	},
	{
		name: "consolidate",
		description: "shrink and clean the memory base: [global] [shared] [personal] [--no-paths]",
		async run(realmem, args, ctx) {
			const unknown = args.filter((arg) => !STORES.includes(arg) && arg !== "--no-paths");
			if (unknown.length) return show(ctx, `Unknown consolidate argument(s): ${unknown.join(" ")}`, "error");
			const stores = args.filter((arg) => STORES.includes(arg));
			await runLong(realmem, ctx, {
				title: "Consolidation",
				method: "consolidate",
				params: { ...base(ctx), ...(stores.length ? { stores } : {}), paths: !args.includes("--no-paths") },
				// The core writes only after its last progress step, so a cancel it saw wrote nothing.
				cancelled: "cancelled: nothing written.",
			});
		},
	},
	{
		name: "retry",
		description: "process queued candidates now",
		run: (realmem, _args, ctx) =>
			runLong(realmem, ctx, {
				title: "Retry",
				method: "retry",
				params: { cwd: ctx.cwd },
				cancelled: "cancelled; candidates processed before it stay processed, the rest stay queued.",
			}),
	},
	{
		name: "embed",
		description: "embed memories that have no embedding",
		run: (realmem, _args, ctx) =>
			runLong(realmem, ctx, {
				title: "Embedding",
				method: "embed",
				params: { cwd: ctx.cwd },
				cancelled: "cancelled; memories embedded before it keep their embeddings.",
			}),
	},
	{
		name: "reindex",
		description: "rebuild the search index",
		run: (realmem, _args, ctx) =>
			runLong(realmem, ctx, {
				title: "Reindexing",
				method: "reindex",
				params: { cwd: ctx.cwd },
				cancelled: "cancelled; the index is unchanged.",
			}),
	},
];

export function registerCommand(pi: ExtensionAPI, realmem: Realmem): void {
	pi.registerCommand("realmem", {
		description: "realmem long-term memory: manage, settings, debug, status, add, import, consolidate, ...",
		getArgumentCompletions(prefix: string): AutocompleteItem[] | null {
			if (prefix.includes(" ")) return null;
			const items = SUBCOMMANDS.filter((sub) => sub.name.startsWith(prefix)).map((sub) => ({
				value: sub.name,
				label: sub.name,
				description: sub.description,
			}));
			return items.length ? items : null;
		},
		async handler(rawArgs, ctx) {
			const [name, ...args] = rawArgs.trim().split(/\s+/).filter(Boolean);
			let chosen = name;
			if (!chosen) {
				const labels = SUBCOMMANDS.map((sub) => `${sub.name} — ${sub.description}`);
				const picked = await ctx.ui.select("realmem", labels);
				if (!picked) return;
				chosen = SUBCOMMANDS[labels.indexOf(picked)]?.name;
			}
			const sub = SUBCOMMANDS.find((candidate) => candidate.name === chosen);
			if (!sub) {
				return show(ctx, `Unknown /realmem subcommand "${chosen}". Available: ${SUBCOMMANDS.map((s) => s.name).join(", ")}`, "error");
			}
			try {
				await sub.run(realmem, args, ctx);
			} catch (error) {
				show(ctx, describeError(error), "error");
			}
		},
	});
}
