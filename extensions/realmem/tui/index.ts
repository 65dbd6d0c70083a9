/**
 * The /realmem screens (manage, settings, debug), each opened with ctx.ui.custom. Without the
 * interactive UI (print or RPC mode) they say so and do nothing.
 */
import type { ExtensionCommandContext } from "@earendil-works/pi-coding-agent";
import type { CoreCall } from "./common.js";
import { DebugScreen } from "./debug.js";
import { ManageScreen } from "./manage.js";
import { SettingsScreen } from "./settings.js";

export type { CoreCall, Screen } from "./common.js";
export { DebugScreen } from "./debug.js";
export { ManageScreen } from "./manage.js";
export { SettingsScreen } from "./settings.js";

function needsUI(ctx: ExtensionCommandContext, name: string): boolean {
	if (ctx.hasUI) return false;
	ctx.ui.notify(`/realmem ${name} needs the interactive UI (try the \`realmem ${name}\` command line instead)`, "warning");
	return true;
}

function session(ctx: ExtensionCommandContext) {
	return { cwd: ctx.cwd, session: ctx.sessionManager.getSessionId() };
}

export async function openManage(ctx: ExtensionCommandContext, call: CoreCall, query = ""): Promise<void> {
	if (needsUI(ctx, "manage")) return;
	await ctx.ui.custom<void>((tui, theme, _keybindings, done) => new ManageScreen({ tui, theme, call, ...session(ctx), query, done: () => done() }));
}

export async function openSettings(ctx: ExtensionCommandContext, call: CoreCall): Promise<void> {
	if (needsUI(ctx, "settings")) return;
	await ctx.ui.custom<void>((tui, theme, _keybindings, done) => new SettingsScreen({ tui, theme, call, done: () => done() }));
}

/** Asks for the candidate (caption, content, optional paths), then shows its dry-run trace. */
export async function openDebug(ctx: ExtensionCommandContext, call: CoreCall): Promise<void> {
	if (needsUI(ctx, "debug")) return;
	const caption = (await ctx.ui.input("Debug: candidate caption (one line)", "e.g. Run e2e tests with pnpm test:e2e"))?.trim();
	if (!caption) return;
	const content = (await ctx.ui.editor("Debug: candidate content", ""))?.trim();
	if (!content) return;
	const rawPaths = (await ctx.ui.input("Debug: candidate paths (comma-separated, optional)", "e.g. src/db, **/migrations/*.sql")) ?? "";
	const paths = rawPaths
		.split(",")
		.map((p) => p.trim())
		.filter(Boolean);
	await ctx.ui.custom<void>(
		(tui, theme, _keybindings, done) => new DebugScreen({ tui, theme, call, ...session(ctx), caption, content, paths, done: () => done() }),
	);
}
