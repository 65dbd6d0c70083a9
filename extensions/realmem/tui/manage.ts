/**
 * /realmem manage: every memory in one list (path-urgency glyph, ✗ missing path, Δ paths changed in
 * git since it was written, Q quarantined, scope, used, caption), filtered as you type (substring) or searched (Tab: semantic), and a
 * detail view per memory with its content and metadata. Keys in the detail view: e edit,
 * s re-scope, d delete, a approve, f apply the suggested location of a missing path, Esc back.
 *
 * Everything shown comes from the core (manage_list, show); every action is one rpc call.
 */
import { type Focusable, Input, type SelectItem, truncateToWidth } from "@earendil-works/pi-tui";
import { type CheckPathsResult, splitPaths } from "../core.js";
import { type CoreCall, cell, fit, keys, Prompt, rows, type Screen, scrollWindow, Tasks, titleBar, type UiHost, type UiTheme, wrap } from "./common.js";

export interface ManageItem {
	id: string;
	caption: string;
	scope: string;
	paths: string[];
	used_count: number;
	path_inject_count: number;
	urgency: number | null;
	glyph: string;
	missing: boolean;
	/** The freshness flag: its paths changed in git after it was written (null when fresh). */
	stale?: string | null;
	quarantined: string | null;
}

export interface StaleInfo {
	paths: string[];
	commits: number;
	since: string;
	at_least: boolean;
	text: string;
}

export interface UrgencyInfo {
	score: number;
	probabilities: Record<string, number> | number[];
	confidence: number | null;
	source: string | null;
	/** Judged on the current content and paths (else it is stale and not used). */
	current?: boolean;
	/** full | caption | count under the current thresholds. */
	tier?: string;
}

export interface MemoryDetail {
	id: string;
	caption: string;
	content: string;
	scope: string;
	paths: string[];
	used_count: number;
	path_inject_count: number;
	created?: string | number;
	updated?: string | number;
	file?: string;
	file_path?: string;
	quarantined: string | null;
	specific?: boolean;
	glyph?: string;
	thresholds?: { high: number; mid: number };
	urgency?: UrgencyInfo | null;
	/** Missing path -> suggested new location (null when git knows none). */
	missing_paths?: Record<string, string | null>;
	stale?: StaleInfo | null;
}

const SCOPES = ["global", "shared", "personal"];
const LEVELS: Record<string, string> = { "0": "low", "1": "mid", "2": "high" };
const TIER_TEXT: Record<string, string> = {
	full: "● full content",
	caption: "◐ caption with id",
	count: "○ only counted",
};

export interface ManageOptions {
	tui: UiHost;
	theme: UiTheme;
	call: CoreCall;
	cwd: string;
	session: string;
	query?: string;
	done: () => void;
}

export class ManageScreen implements Screen, Focusable {
	mode: "list" | "detail" = "list";
	items: ManageItem[] = [];
	selected = 0;
	semantic = false;
	detail: MemoryDetail | undefined;
	private scroll = 0;
	private loaded = false;
	private seq = 0;
	private readonly filter = new Input();
	private readonly prompt: Prompt;
	private readonly tasks: Tasks;
	private _focused = false;

	constructor(private readonly o: ManageOptions) {
		this.prompt = new Prompt(o.tui, o.theme);
		this.tasks = new Tasks(o.tui);
		this.filter.setValue(o.query ?? "");
		void this.reload();
	}

	get focused(): boolean {
		return this._focused;
	}
	set focused(value: boolean) {
		this._focused = value;
		this.filter.focused = value && this.mode === "list" && !this.prompt.open;
	}

	idle(): Promise<void> {
		return this.tasks.idle();
	}

	get query(): string {
		return this.filter.getValue();
	}

	private get base() {
		return { cwd: this.o.cwd, session: this.o.session };
	}

	/** Reload the list for the current filter; only the newest answer is shown. */
	reload(keepId?: string): Promise<void> {
		const seq = ++this.seq;
		const query = this.query.trim();
		const semantic = this.semantic && query !== "";
		return this.tasks.run(
			semantic ? "searching" : "loading",
			async () => {
				if (semantic) await new Promise((resolve) => setTimeout(resolve, 200)); // typing: search once it pauses
				if (seq !== this.seq) return undefined;
				return this.o.call<{ items: ManageItem[]; conflicts?: string | null }>("manage_list", {
					cwd: this.o.cwd,
					...(query ? { query } : {}),
					...(semantic ? { semantic: true } : {}),
				});
			},
			(result) => {
				if (!result || seq !== this.seq) return;
				const current = keepId ?? this.items[this.selected]?.id;
				this.items = result.items;
				this.loaded = true;
				// A fact file with merge conflict markers is not in the list: say which and why.
				if (result.conflicts) this.tasks.message = { text: result.conflicts, level: "error" };
				const index = current ? this.items.findIndex((item) => item.id === current) : -1;
				this.selected = Math.max(0, Math.min(index >= 0 ? index : this.selected, this.items.length - 1));
			},
		);
	}

	/** Open (or refresh) the detail view of a memory. */
	open(id: string, message?: string): Promise<void> {
		return this.tasks.run(
			"loading memory",
			() => this.o.call<{ text: string; details: MemoryDetail }>("show", { cwd: this.o.cwd, id }),
			(result) => {
				if (this.detail?.id !== result.details.id) this.scroll = 0;
				this.detail = result.details;
				this.mode = "detail";
				this.filter.focused = false;
				if (message) this.tasks.info(message);
			},
		);
	}

	private back(): void {
		this.mode = "list";
		const id = this.detail?.id;
		this.detail = undefined;
		this.filter.focused = this._focused;
		void this.reload(id);
	}

	/** Run an action on the open memory, then show it again with the core's answer. */
	private act(label: string, method: string, params: Record<string, unknown>): void {
		const id = this.detail?.id;
		if (!id) return;
		void this.tasks.run(
			label,
			() => this.o.call<{ text: string }>(method, { ...this.base, id, ...params }),
			(result) => void this.open(id, result.text),
		);
	}

	handleInput(data: string): void {
		this.tasks.message = undefined;
		if (this.prompt.open) {
			this.prompt.handleInput(data);
		} else if (this.mode === "list") {
			this.listInput(data);
		} else {
			this.detailInput(data);
		}
		this.filter.focused = this._focused && this.mode === "list" && !this.prompt.open;
		this.o.tui.requestRender();
	}

	private listInput(data: string): void {
		if (keys.cancel(data)) return this.o.done();
		if (keys.up(data)) this.selected = Math.max(0, this.selected - 1);
		else if (keys.down(data)) this.selected = Math.min(this.items.length - 1, this.selected + 1);
		else if (keys.pageUp(data)) this.selected = Math.max(0, this.selected - this.listHeight());
		else if (keys.pageDown(data)) this.selected = Math.max(0, Math.min(this.items.length - 1, this.selected + this.listHeight()));
		else if (keys.enter(data)) {
			const item = this.items[this.selected];
			if (item) void this.open(item.id);
		} else if (keys.tab(data)) {
			this.semantic = !this.semantic;
			void this.reload();
		} else {
			const before = this.query;
			this.filter.handleInput(data);
			if (this.query !== before) {
				this.selected = 0;
				void this.reload();
			}
		}
	}

	private detailInput(data: string): void {
		const d = this.detail;
		if (!d) return;
		if (keys.cancel(data)) return this.back();
		if (keys.up(data)) this.scroll = Math.max(0, this.scroll - 1);
		else if (keys.down(data)) this.scroll += 1;
		else if (keys.pageUp(data)) this.scroll = Math.max(0, this.scroll - this.bodyHeight());
		else if (keys.pageDown(data)) this.scroll += this.bodyHeight();
		else if (keys.letter(data, "e")) this.startEdit(d);
		else if (keys.letter(data, "s")) {
			const items: SelectItem[] = SCOPES.map((scope) => ({
				value: scope,
				label: scope,
				description: scope === d.scope ? "(current)" : undefined,
			}));
			this.prompt.choice(`Move [${d.id}] to`, items, (scope) => {
				if (scope !== d.scope) this.act("moving", "move", { scope });
			}, Math.max(0, SCOPES.indexOf(d.scope)));
		} else if (keys.letter(data, "d")) {
			this.prompt.confirm(`Delete [${d.id}]?`, [d.caption, "This removes the memory file; it cannot be undone here."], () => {
				void this.tasks.run(
					"deleting",
					() => this.o.call<{ text: string }>("forget", { ...this.base, ids: [d.id] }),
					(result) => {
						this.back();
						this.tasks.info(result.text);
					},
				);
			});
		} else if (keys.letter(data, "a")) {
			if (!d.quarantined) {
				this.tasks.info("This memory is not quarantined.");
				return;
			}
			this.prompt.confirm(`Approve [${d.id}]?`, [`Quarantined: ${d.quarantined}`, "The model will see this memory again."], () =>
				this.act("approving", "approve", {}),
			);
		} else if (keys.letter(data, "f")) {
			const suggestions = Object.entries(d.missing_paths ?? {}).filter((entry): entry is [string, string] => Boolean(entry[1]));
			if (!suggestions.length) {
				this.tasks.info(Object.keys(d.missing_paths ?? {}).length ? "No suggested location for the missing paths." : "No path of this memory is missing.");
				return;
			}
			if (suggestions.length === 1) return this.act("applying", "apply_suggested_path", { path: suggestions[0][0] });
			this.prompt.choice(
				"Apply which suggestion?",
				suggestions.map(([path, to]) => ({ value: path, label: `${path} → ${to}` })),
				(path) => this.act("applying", "apply_suggested_path", { path }),
			);
		}
	}

	private startEdit(d: MemoryDetail): void {
		this.prompt.choice(
			`Edit [${d.id}]`,
			[
				{ value: "caption", label: "caption", description: "one line" },
				{ value: "content", label: "content", description: "the fact" },
				{ value: "paths", label: "paths", description: "files, directories or globs, comma-separated; empty: whole store" },
			],
			(what) => {
				if (what === "caption") {
					this.prompt.input("Caption", d.caption, (value) => {
						if (value.trim() && value.trim() !== d.caption) this.act("saving", "edit", { caption: value.trim() });
					});
				} else if (what === "content") {
					this.prompt.editor("Content", d.content, (value) => {
						if (value.trim() && value.trim() !== d.content.trim()) this.act("saving", "edit", { content: value.trim() });
					});
				} else {
					this.prompt.input("Paths (comma-separated; empty = whole store)", d.paths.join(", "), (value) =>
						this.savePaths(splitPaths(value)),
					);
				}
			},
		);
	}

	/** The same check as /realmem add: invalid paths are refused, missing ones need a confirm. */
	private savePaths(paths: string[]): void {
		if (!paths.length) return this.act("saving", "edit", { paths });
		void this.tasks.run(
			"checking paths",
			() => this.o.call<CheckPathsResult>("check_paths", { cwd: this.o.cwd, paths }),
			(check) => {
				if (check.invalid.length) {
					this.tasks.message = { text: `Not a usable path: ${check.invalid.join("; ")}`, level: "error" };
				} else if (check.warnings.length) {
					this.prompt.confirm("Some paths do not exist. Save them anyway?", check.warnings, () =>
						this.act("saving", "edit", { paths }),
					);
				} else this.act("saving", "edit", { paths });
			},
		);
	}

	private listHeight(): number {
		return Math.max(5, rows(this.o.tui) - 10 - (this.prompt.open ? 8 : 0));
	}

	private bodyHeight(): number {
		return Math.max(6, rows(this.o.tui) - 8 - (this.prompt.open ? 10 : 0));
	}

	invalidate(): void {
		// rendered fresh on every call; nothing cached
	}

	render(width: number): string[] {
		const lines = this.mode === "detail" && this.detail ? this.renderDetail(width, this.detail) : this.renderList(width);
		return fit(lines, width);
	}

	private renderList(width: number): string[] {
		const t = this.o.theme;
		const out = [titleBar(t, `realmem · memories${this.loaded ? ` (${this.items.length})` : ""}`, width)];
		const mode = this.semantic ? t.fg("accent", "semantic search") : t.fg("muted", "substring filter");
		out.push(`${mode} ${t.fg("dim", "(tab toggles)")}`);
		out.push(...this.filter.render(width));
		const usedWidth = 5;
		out.push(t.fg("dim", `  U✗ΔQ ${cell("scope", 8)} ${"used".padStart(usedWidth)}  caption`));
		if (this.loaded && !this.items.length) {
			out.push(t.fg("muted", this.query ? "  No memory matches." : "  No memories yet."));
		}
		const height = this.listHeight();
		const start = Math.max(0, Math.min(this.selected - Math.floor(height / 2), this.items.length - height));
		for (const [offset, item] of this.items.slice(start, start + height).entries()) {
			const index = start + offset;
			const selected = index === this.selected;
			const flags =
				this.glyph(item.glyph) +
				(item.missing ? t.fg("error", "✗") : " ") +
				(item.stale ? t.fg("warning", "Δ") : " ") +
				(item.quarantined ? t.fg("warning", "Q") : " ");
			const caption = selected ? t.fg("accent", item.caption) : item.caption;
			const paths = item.paths.length && !(item.paths.length === 1 && [".", "~"].includes(item.paths[0])) ? `  ${t.fg("dim", item.paths.join(", "))}` : "";
			const row = `${selected ? t.fg("accent", "› ") : "  "}${flags} ${cell(item.scope, 8)} ${String(item.used_count).padStart(usedWidth)}  ${caption}${paths}`;
			out.push(selected ? truncateToWidth(row, width) : row);
		}
		if (this.items.length > height) out.push(t.fg("dim", `  (${this.selected + 1}/${this.items.length})`));
		out.push(...this.tasks.statusLines(t, width));
		out.push(...this.prompt.render(width));
		out.push(t.fg("dim", "↑↓ move · enter open · type to filter · tab semantic · esc close"));
		out.push(t.fg("dim", "● full · ◐ caption · ○ count · ? unjudged · ✗ missing path · Δ changed in git · Q quarantined"));
		return out;
	}

	private glyph(glyph: string): string {
		const t = this.o.theme;
		switch (glyph) {
			case "●":
				return t.fg("warning", glyph);
			case "◐":
				return t.fg("accent", glyph);
			case "○":
				return t.fg("dim", glyph);
			case "?":
				return t.fg("muted", glyph);
			default:
				return " ";
		}
	}

	/** Metadata and content of one memory, as plain lines (before scrolling). */
	detailBody(d: MemoryDetail, width: number): string[] {
		const t = this.o.theme;
		const out: string[] = [];
		out.push(...wrap(t.bold(d.caption), width));
		const paths = d.paths.length ? d.paths.join(", ") : "(whole store)";
		out.push(`${t.fg("muted", "scope")} ${d.scope} · ${t.fg("muted", "paths")} ${paths}`);
		out.push(`${t.fg("muted", "used")} ${d.used_count} · ${t.fg("muted", "shown on touch")} ${d.path_inject_count}`);
		if (d.file_path ?? d.file) out.push(`${t.fg("muted", "file")} ${d.file_path ?? d.file}`);
		if (d.updated !== undefined) out.push(`${t.fg("muted", "updated")} ${d.updated}${d.created !== undefined ? ` · created ${d.created}` : ""}`);
		out.push(...this.urgencyLines(d, width));
		if (d.stale) out.push(...wrap(t.fg("warning", `Δ ${d.stale.text} (an edit clears this)`), width));
		const missing = Object.entries(d.missing_paths ?? {});
		if (missing.length) {
			out.push(t.fg("error", "Missing paths:"));
			for (const [path, suggested] of missing) {
				out.push(`  ✗ ${path} ${suggested ? `→ suggested ${t.fg("accent", suggested)} (f applies)` : t.fg("dim", "(no suggested location)")}`);
			}
		}
		if (d.quarantined) out.push(...wrap(t.fg("warning", `QUARANTINED: ${d.quarantined} (a approves)`), width));
		out.push(t.fg("borderMuted", "─".repeat(Math.min(width, 40))));
		out.push(...wrap(d.content, width));
		return out;
	}

	private urgencyLines(d: MemoryDetail, width: number): string[] {
		const t = this.o.theme;
		const th = d.thresholds ? ` (thresholds: high ≥ ${d.thresholds.high}, mid ≥ ${d.thresholds.mid})` : "";
		if (d.specific === false) return [`${t.fg("muted", "path urgency")} project-wide: shown in the system prompt, no path notes`];
		const u = d.urgency;
		if (!u) return [`${t.fg("muted", "path urgency")} ? not judged yet → ${TIER_TEXT.caption}${th}`];
		const tier = TIER_TEXT[u.tier ?? ""] ?? u.tier ?? "";
		const stale = u.current === false ? t.fg("warning", " [judged on older content or paths; not used until re-judged]") : "";
		const lines = [`${t.fg("muted", "path urgency")} ${u.score.toFixed(2)} → ${tier}${th}${stale}`];
		// the judge's levels are the scores 0, 1, 2 (Low, Mid, High)
		const entries: Array<[string, number]> = Array.isArray(u.probabilities)
			? u.probabilities.map((p, i) => [String(i), p])
			: Object.entries(u.probabilities ?? {}).sort(([a], [b]) => a.localeCompare(b));
		const probs = entries.map(([level, p]) => `${LEVELS[level] ?? level} ${Number(p).toFixed(2)}`);
		const extra = [
			probs.length ? `levels ${probs.join(" · ")}` : "",
			u.confidence !== null && u.confidence !== undefined ? `confidence ${Number(u.confidence).toFixed(2)}` : "",
			u.source ? `source ${u.source}` : "",
		].filter(Boolean);
		if (extra.length) lines.push(...wrap(`  ${extra.join(" · ")}`, width));
		return lines;
	}

	private renderDetail(width: number, d: MemoryDetail): string[] {
		const t = this.o.theme;
		const out = [titleBar(t, `realmem · memory ${d.id}`, width)];
		const body = this.detailBody(d, width);
		const view = scrollWindow(t, body, this.scroll, this.bodyHeight());
		this.scroll = view.scroll;
		out.push(...view.lines);
		out.push(...this.tasks.statusLines(t, width));
		out.push(...this.prompt.render(width));
		const acts = ["e edit", "s scope", "d delete", ...(d.quarantined ? ["a approve"] : []), ...(Object.values(d.missing_paths ?? {}).some(Boolean) ? ["f apply suggested path"] : []), "↑↓ scroll", "esc back"];
		out.push(t.fg("dim", acts.join(" · ")));
		return out;
	}
}
