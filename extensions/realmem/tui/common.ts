/**
 * Shared pieces of the /realmem screens: the theme subset they use, the rpc call they are given,
 * inline prompts (confirm, one-line input, multi-line editor, choice list) that open inside a
 * screen the way Pi's own session selector asks before deleting, and busy/error tracking for the
 * rpc calls a key press starts.
 *
 * Screens hold no memory logic: they render what the core returns and send the user's actions back.
 */
import type { Theme } from "@earendil-works/pi-coding-agent";
import {
	type Component,
	Editor,
	getKeybindings,
	Input,
	matchesKey,
	type SelectItem,
	SelectList,
	type SelectListTheme,
	type TUI,
	truncateToWidth,
	visibleWidth,
	wrapTextWithAnsi,
} from "@earendil-works/pi-tui";
import { describeError } from "../core.js";

/** The part of Pi's theme the screens use (tests pass a plain one). */
export type UiTheme = Pick<Theme, "fg" | "bg" | "bold">;

/** What a screen needs from the TUI: re-render requests, and the terminal height for sizing. */
export type UiHost = Pick<TUI, "requestRender"> & { terminal?: { rows: number } };

/** One rpc call to the core (realmem.core.call, bound). */
export type CoreCall = <T>(method: string, params: Record<string, unknown>, options?: { timeoutMs?: number }) => Promise<T>;

export function rows(tui: UiHost, fallback = 30): number {
	const value = (tui as { terminal?: { rows?: number } }).terminal?.rows;
	return typeof value === "number" && value > 0 ? value : fallback;
}

export function selectListTheme(theme: UiTheme): SelectListTheme {
	return {
		selectedPrefix: (t) => theme.fg("accent", t),
		selectedText: (t) => theme.fg("accent", t),
		description: (t) => theme.fg("muted", t),
		scrollInfo: (t) => theme.fg("dim", t),
		noMatch: (t) => theme.fg("warning", t),
	};
}

/** Pads or cuts plain text to exactly `width` cells. */
export function cell(text: string, width: number): string {
	const cut = truncateToWidth(text, width, "…");
	return cut + " ".repeat(Math.max(0, width - visibleWidth(cut)));
}

/** Wraps text (keeping blank lines) to the width. */
export function wrap(text: string, width: number): string[] {
	const out: string[] = [];
	for (const line of text.split("\n")) {
		if (!line) out.push("");
		else out.push(...wrapTextWithAnsi(line, Math.max(10, width)));
	}
	return out;
}

/** A border line with a title: `── title ─────`. */
export function titleBar(theme: UiTheme, title: string, width: number): string {
	const head = `── ${title} `;
	const rest = Math.max(0, width - visibleWidth(head));
	return truncateToWidth(theme.fg("borderAccent", "── ") + theme.fg("accent", theme.bold(title)) + " " + theme.fg("borderAccent", "─".repeat(rest)), width);
}

/**
 * The visible slice of a scrollable body (scroll clamped to the body), plus a
 * "lines a-b of n" footer when it does not fit.
 */
export function scrollWindow(
	theme: UiTheme,
	body: string[],
	scroll: number,
	height: number,
): { lines: string[]; scroll: number } {
	const top = Math.max(0, Math.min(scroll, body.length - height));
	const lines = body.slice(top, top + height);
	if (body.length > height) {
		lines.push(theme.fg("dim", `  (lines ${top + 1}-${Math.min(body.length, top + height)} of ${body.length})`));
	}
	return { lines, scroll: top };
}

export function fit(lines: string[], width: number): string[] {
	return lines.map((line) => truncateToWidth(line, width));
}

export const keys = {
	up: (data: string) => getKeybindings().matches(data, "tui.select.up"),
	down: (data: string) => getKeybindings().matches(data, "tui.select.down"),
	pageUp: (data: string) => getKeybindings().matches(data, "tui.select.pageUp"),
	pageDown: (data: string) => getKeybindings().matches(data, "tui.select.pageDown"),
	enter: (data: string) => getKeybindings().matches(data, "tui.select.confirm"),
	cancel: (data: string) => getKeybindings().matches(data, "tui.select.cancel"),
	tab: (data: string) => matchesKey(data, "tab"),
	letter: (data: string, letter: string) => data === letter || matchesKey(data, letter as never),
};

type PromptState =
	| { kind: "confirm"; title: string; body: string[]; onYes: () => void }
	| { kind: "input"; title: string; hint: string; input: Input; onSubmit: (value: string) => void }
	| { kind: "editor"; title: string; editor: Editor; onSubmit: (value: string) => void }
	| { kind: "choice"; title: string; list: SelectList; onSelect: (value: string) => void };

/**
 * An inline prompt at the bottom of a screen. While one is open it takes every key; Esc closes it
 * without doing anything.
 */
export class Prompt {
	private state: PromptState | undefined;

	constructor(
		private readonly tui: UiHost,
		private readonly theme: UiTheme,
	) {}

	get open(): boolean {
		return this.state !== undefined;
	}

	get kind(): PromptState["kind"] | undefined {
		return this.state?.kind;
	}

	close(): void {
		this.state = undefined;
	}

	confirm(title: string, body: string[], onYes: () => void): void {
		this.state = { kind: "confirm", title, body, onYes };
	}

	input(title: string, value: string, onSubmit: (value: string) => void, hint = "enter saves · esc cancels"): void {
		const input = new Input();
		input.setValue(value);
		// setValue keeps the cursor where it was (0 on a new Input); edits start at the end
		Object.assign(input, { cursor: value.length });
		input.focused = true;
		input.onSubmit = (submitted) => {
			this.close();
			onSubmit(submitted);
		};
		input.onEscape = () => this.close();
		this.state = { kind: "input", title, hint, input, onSubmit };
	}

	editor(title: string, value: string, onSubmit: (value: string) => void): void {
		const editor = new Editor(this.tui as TUI, {
			borderColor: (s) => this.theme.fg("borderMuted", s),
			selectList: selectListTheme(this.theme),
		});
		editor.setText(value);
		editor.focused = true;
		editor.onSubmit = (submitted) => {
			this.close();
			onSubmit(submitted);
		};
		this.state = { kind: "editor", title, editor, onSubmit };
	}

	choice(title: string, items: SelectItem[], onSelect: (value: string) => void, selected = 0): void {
		const list = new SelectList(items, Math.min(items.length, 12), selectListTheme(this.theme));
		list.setSelectedIndex(selected);
		list.onSelect = (item) => {
			this.close();
			onSelect(item.value);
		};
		list.onCancel = () => this.close();
		this.state = { kind: "choice", title, list, onSelect };
	}

	handleInput(data: string): void {
		const state = this.state;
		if (!state) return;
		switch (state.kind) {
			case "confirm":
				if (keys.letter(data, "y") || keys.enter(data)) {
					this.close();
					state.onYes();
				} else if (keys.letter(data, "n") || keys.cancel(data)) {
					this.close();
				}
				return;
			case "input":
				state.input.handleInput(data);
				return;
			case "editor":
				if (keys.cancel(data)) return this.close();
				state.editor.handleInput(data);
				return;
			case "choice":
				state.list.handleInput(data);
				return;
		}
	}

	render(width: number): string[] {
		const state = this.state;
		if (!state) return [];
		const t = this.theme;
		const lines = [t.fg("borderMuted", "─".repeat(width)), t.fg("warning", t.bold(state.title))];
		switch (state.kind) {
			case "confirm":
				lines.push(...state.body.flatMap((line) => wrap(line, width)));
				lines.push(t.fg("dim", "y / enter: yes · n / esc: no"));
				break;
			case "input":
				lines.push(...state.input.render(width));
				lines.push(t.fg("dim", state.hint));
				break;
			case "editor":
				lines.push(...state.editor.render(width));
				lines.push(t.fg("dim", "enter saves · shift+enter newline · esc cancels"));
				break;
			case "choice":
				lines.push(...state.list.render(width));
				lines.push(t.fg("dim", "↑↓ move · enter pick · esc cancel"));
				break;
		}
		return fit(lines, width);
	}
}

/**
 * Runs the rpc calls a screen starts: one status line while they run, the last error or message
 * after. `idle()` resolves when every started call has settled (tests wait on it).
 */
export class Tasks {
	busy: string | undefined;
	message: { text: string; level: "info" | "error" } | undefined;
	private pending = new Set<Promise<void>>();

	constructor(private readonly tui: UiHost) {}

	run<T>(label: string, work: () => Promise<T>, after?: (value: T) => void): Promise<void> {
		this.busy = label;
		this.tui.requestRender();
		const task = (async () => {
			try {
				const value = await work();
				after?.(value);
			} catch (error) {
				this.message = { text: describeError(error), level: "error" };
			}
		})();
		const settled: Promise<void> = task.then(() => {
			this.pending.delete(settled);
			if (this.pending.size === 0) this.busy = undefined;
			this.tui.requestRender();
		});
		this.pending.add(settled);
		return settled;
	}

	info(text: string): void {
		this.message = { text, level: "info" };
	}

	async idle(): Promise<void> {
		while (this.pending.size) await Promise.allSettled([...this.pending]);
	}

	statusLines(theme: UiTheme, width: number): string[] {
		const out: string[] = [];
		if (this.busy) out.push(theme.fg("dim", `… ${this.busy}`));
		else if (this.message) {
			const color = this.message.level === "error" ? "error" : "success";
			out.push(...wrap(this.message.text, width).map((line) => theme.fg(color, line)));
		}
		return out;
	}
}

/** A component whose `render` is delegated, so a screen can swap what it shows. */
export interface Screen extends Component {
	/** Resolves when the rpc calls started by earlier keys have settled. */
	idle(): Promise<void>;
}
