/**
 * The model-facing tools. Each one is a single rpc call; the core renders the answer (`text`),
 * so ranking, wording and paging live once, in Python.
 */
import { StringEnum } from "@earendil-works/pi-ai";
import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";
import { Type } from "typebox";
import { type Core, describeError, type TextResult } from "./core.js";

export interface ToolHost {
	core: Core;
	/** Paths touched recently in this session, most recent first. */
	recentPaths(): string[];
}

/** Scope names as the core's CLI spells them (`realmem remember --scope global|shared|personal`). */
const Scope = StringEnum(["global", "shared", "personal"] as const, {
	description:
		"global: every project (user preferences, general knowledge); shared: this project, committed with it (setup, conventions, architecture); personal: this project on this machine only (local paths, workarounds)",
});

const Paths = Type.Array(Type.String(), {
	description: "Files, directories or globs, relative to the cwd, as ~/..., or absolute",
});

/** Drop undefined fields so the core sees only what the model gave. */
function defined(params: Record<string, unknown>): Record<string, unknown> {
	return Object.fromEntries(Object.entries(params).filter(([, value]) => value !== undefined));
}

async function run(
	host: ToolHost,
	method: string,
	params: Record<string, unknown>,
	ctx: ExtensionContext,
	signal: AbortSignal | undefined,
) {
	if (signal?.aborted) throw new Error("cancelled");
	let result: TextResult;
	try {
		result = await host.core.call<TextResult>(method, {
			cwd: ctx.cwd,
			session: ctx.sessionManager.getSessionId(),
			...defined(params),
		});
	} catch (error) {
		// Throwing marks the result as an error for the model; the message says what to do.
		throw new Error(describeError(error));
	}
	return { content: [{ type: "text" as const, text: result.text }], details: result.details };
}

export function registerTools(pi: ExtensionAPI, host: ToolHost): void {
	pi.registerTool({
		name: "realmem_recall",
		label: "Recall memories",
		description:
			"Search long-term memory (realmem). Call it before starting any work, with queries about the task and the paths you will touch. Results are ordered by path (memories about the given or recently touched paths first, project-wide next, other areas last), then by use, then by relevance, and are paginated. `paths` alone lists the memories attached to those paths; `ids` reads memories that were shown as captions.",
		promptSnippet: "Search long-term memory (realmem) by queries, paths or ids",
		parameters: Type.Object({
			queries: Type.Optional(
				Type.Array(Type.String(), { description: "Search queries; several phrasings find more" }),
			),
			paths: Type.Optional(Paths),
			ids: Type.Optional(Type.Array(Type.String(), { description: "Memory ids (or unique prefixes) to read in full" })),
			page: Type.Optional(Type.Integer({ minimum: 1, description: "Result page, from 1" })),
			scope: Type.Optional(Scope),
		}),
		async execute(_toolCallId, params, signal, _onUpdate, ctx) {
			return run(host, "recall", { ...params, recent_paths: host.recentPaths() }, ctx, signal);
		},
	});

	pi.registerTool({
		name: "realmem_remember",
		label: "Remember",
		description:
			"Store a new, important and durable fact in long-term memory (realmem): project setup, conventions, architecture decisions, commands that work, pitfalls and their fixes, user preferences. Not task status or anything easily re-derived. A fact that corrects an existing memory updates it. The memory gate decides whether to add, edit, merge or just reinforce.",
		promptSnippet: "Store a new, important, durable fact in long-term memory (realmem)",
		parameters: Type.Object({
			caption: Type.String({ description: "One-line summary of the fact" }),
			content: Type.String({ description: "The fact itself, with exact commands, names and values" }),
			scope: Type.Optional(Scope),
			paths: Type.Optional(Paths),
			user_requested: Type.Optional(
				Type.Boolean({ description: "True only when the user explicitly asked to remember this" }),
			),
		}),
		async execute(_toolCallId, params, signal, _onUpdate, ctx) {
			return run(host, "remember", params, ctx, signal);
		},
	});

	pi.registerTool({
		name: "realmem_status",
		label: "Memory status",
		description:
			"Show realmem's state: memory counts per store, queued candidates, worker and endpoint health, and git-ignore warnings for the shared store.",
		parameters: Type.Object({}),
		async execute(_toolCallId, _params, signal, _onUpdate, ctx) {
			return run(host, "status", {}, ctx, signal);
		},
	});

	pi.registerTool({
		name: "realmem_list",
		label: "List memories",
		description:
			"List every memory, sorted by path, then by use. Large output: prefer realmem_recall with queries or paths, and use this only when asked to review all memories.",
		parameters: Type.Object({
			page: Type.Optional(Type.Integer({ minimum: 1, description: "Result page, from 1" })),
			scope: Type.Optional(Scope),
		}),
		async execute(_toolCallId, params, signal, _onUpdate, ctx) {
			return run(host, "list", params, ctx, signal);
		},
	});

	pi.registerTool({
		name: "realmem_forget",
		label: "Forget memories",
		description:
			"Delete memories that are obsolete or wrong, by id (or unique id prefix). To correct a memory, prefer realmem_remember with the corrected fact.",
		parameters: Type.Object({
			ids: Type.Array(Type.String(), { minItems: 1, description: "Memory ids or unique prefixes" }),
		}),
		async execute(_toolCallId, params, signal, _onUpdate, ctx) {
			return run(host, "forget", params, ctx, signal);
		},
	});
}
