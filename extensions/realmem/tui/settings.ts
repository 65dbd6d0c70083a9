/**
 * /realmem settings, built like Pi's own /settings (pi-tui's SettingsList): type to search, ↑↓ to
 * move, the selected setting's one-line description under the list. Settings come grouped in the
 * core's sections (Endpoints, Judge thresholds, Path notes, Recall, Consolidation, Advanced) with
 * their descriptions and defaults: the core's settings schema is the one source, this screen only
 * renders it. A value that is not the default is marked with the default beside it; a key given as
 * $VAR / env:VAR whose variable is unset shows as "missing: $VAR is not set".
 *
 * Enter edits one: a model picker for *.model keys (the endpoint's /v1/models, plus "(auto)" and
 * "type a name"), true/false for switches, a one-line input for the rest (empty resets to the
 * default; $VAR / env:VAR references are saved as typed). The "Test connections" row (or ctrl+t)
 * reaches every endpoint. Keys are shown masked, as the core returns them.
 */
import { type Focusable, Input, matchesKey, type SelectItem } from "@earendil-works/pi-tui";
import { describeError } from "../core.js";
import { type CoreCall, cell, fit, keys, Prompt, rows, type Screen, Tasks, titleBar, type UiHost, type UiTheme, wrap } from "./common.js";

export interface SettingItem {
	key: string;
	value: unknown;
	source: string;
	group: string;
	description: string;
	default: unknown;
	is_default: boolean;
	env: string;
	/** e.g. "missing: $VAR is not set": the value does not work as it is. */
	problem: string | null;
}

export interface EndpointTest {
	endpoint: string;
	ok: boolean;
	message: string;
}

const ENDPOINTS = ["semif", "embedding", "rewriter"];
const AUTO = "__auto__";
const TYPE = "__type__";
const TEST_ROW = "▶ Test connections";

export interface SettingsOptions {
	tui: UiHost;
	theme: UiTheme;
	call: CoreCall;
	done: () => void;
}

/**
 * Whether a setting matches the search: every word appears in its key, section or description.
 * (Substrings, not Pi's fuzzy match: across descriptions a fuzzy "rrf" matches half the list.)
 */
export function matchesSearch(item: Pick<SettingItem, "key" | "group" | "description">, query: string): boolean {
	const text = `${item.key} ${item.group} ${item.description}`.toLowerCase();
	return query
		.toLowerCase()
		.split(/\s+/)
		.filter(Boolean)
		.every((word) => text.includes(word));
}

export function displayValue(value: unknown): string {
	if (value === "" || value === null || value === undefined) return "—";
	return typeof value === "string" ? value : JSON.stringify(value);
}

export class SettingsScreen implements Screen, Focusable {
	items: SettingItem[] = [];
	groups: string[] = [];
	/** Index into `visible` (the filtered settings), or `visible.length` for the test row. */
	selected = 0;
	tests: EndpointTest[] | undefined;
	private loaded = false;
	private _focused = false;
	private readonly search = new Input();
	private readonly prompt: Prompt;
	private readonly tasks: Tasks;

	constructor(private readonly o: SettingsOptions) {
		this.prompt = new Prompt(o.tui, o.theme);
		this.tasks = new Tasks(o.tui);
		void this.reload();
	}

	get focused(): boolean {
		return this._focused;
	}
	set focused(value: boolean) {
		this._focused = value;
		this.search.focused = value && !this.prompt.open;
	}

	idle(): Promise<void> {
		return this.tasks.idle();
	}

	get query(): string {
		return this.search.getValue();
	}

	/** The settings the search leaves, in section order (the core sends them grouped). */
	get visible(): SettingItem[] {
		const query = this.query.trim();
		return query ? this.items.filter((item) => matchesSearch(item, query)) : this.items;
	}

	reload(message?: string): Promise<void> {
		return this.tasks.run(
			"loading settings",
			() => this.o.call<{ items: SettingItem[]; groups: string[] }>("settings_get", {}),
			(result) => {
				this.items = result.items;
				this.groups = result.groups;
				this.loaded = true;
				if (message) this.tasks.info(message);
			},
		);
	}

	/** Rows that can be selected: the visible settings, then the test action. */
	private get rowCount(): number {
		return this.visible.length + 1;
	}

	handleInput(data: string): void {
		this.tasks.message = undefined;
		if (this.prompt.open) this.prompt.handleInput(data);
		else if (keys.cancel(data)) {
			// Like Pi's selectors: Esc clears the search first, then closes.
			if (!this.query) return this.o.done();
			this.search.setValue("");
			this.selected = 0;
		} else if (keys.up(data)) this.selected = Math.max(0, this.selected - 1);
		else if (keys.down(data)) this.selected = Math.min(this.rowCount - 1, this.selected + 1);
		else if (keys.pageUp(data)) this.selected = Math.max(0, this.selected - this.listHeight());
		else if (keys.pageDown(data)) this.selected = Math.min(this.rowCount - 1, this.selected + this.listHeight());
		else if (matchesKey(data, "ctrl+t")) this.test();
		else if (keys.enter(data)) {
			const item = this.visible[this.selected];
			if (item) this.edit(item);
			else this.test();
		} else {
			const before = this.query;
			this.search.handleInput(data);
			if (this.query !== before) this.selected = 0;
		}
		this.search.focused = this._focused && !this.prompt.open;
		this.o.tui.requestRender();
	}

	/** Select a setting by key (tests and callers that open the screen on one key). */
	select(key: string): boolean {
		const index = this.visible.findIndex((item) => item.key === key);
		if (index >= 0) this.selected = index;
		return index >= 0;
	}

	test(): void {
		this.tests = undefined;
		void this.tasks.run(
			"testing connections",
			() => this.o.call<{ results: EndpointTest[] }>("settings_test", {}, { timeoutMs: 120_000 }),
			(result) => {
				this.tests = result.results;
			},
		);
	}

	private save(key: string, value: string): void {
		void this.tasks.run(
			`saving ${key}`,
			() => this.o.call<{ text: string }>("settings_set", { key, value }),
			(result) => {
				const overridden = this.items.find((item) => item.key === key)?.source === "env";
				void this.reload(overridden ? `${result.text} An environment variable overrides it in this process.` : result.text);
			},
		);
	}

	private edit(item: SettingItem): void {
		const [group, name] = item.key.split(".");
		if (name === "model" && ENDPOINTS.includes(group)) return this.pickModel(item, group);
		if (typeof item.value === "boolean") {
			const items: SelectItem[] = [
				{ value: "true", label: "true" },
				{ value: "false", label: "false" },
				{ value: "", label: "(default)", description: `${displayValue(item.default)}; remove from config.json` },
			];
			return this.prompt.choice(item.key, items, (value) => this.save(item.key, value), item.value ? 0 : 1);
		}
		if (name === "key") {
			return this.prompt.input(
				`${item.key} (now ${item.problem ?? displayValue(item.value)})`,
				"",
				(value) => this.save(item.key, value.trim()),
				"type the key, or $VAR / env:VAR to read it from the environment · empty resets · esc cancels",
			);
		}
		const current = item.source === "default" ? "" : typeof item.value === "string" ? item.value : JSON.stringify(item.value);
		this.prompt.input(
			`${item.key} (now ${displayValue(item.value)}, ${item.source})`,
			current,
			(value) => this.save(item.key, value.trim()),
			`enter saves · empty resets to the default (${displayValue(item.default)}) · esc cancels`,
		);
	}

	private pickModel(item: SettingItem, endpoint: string): void {
		const offer = (models: string[], error?: string) => {
			const choices: SelectItem[] = [
				// The core fails when the server lists several models, so (auto) promises only this.
				{ value: AUTO, label: "(auto)", description: "the server's model, when it lists exactly one" },
				...models.map((model) => ({ value: model, label: model })),
				{ value: TYPE, label: "type a name…" },
			];
			const index = models.indexOf(String(item.value));
			this.prompt.choice(
				`${item.key}${error ? ` (models unavailable: ${error})` : ""}`,
				choices,
				(picked) => {
					if (picked === AUTO) this.save(item.key, "");
					else if (picked === TYPE) {
						this.prompt.input(item.key, typeof item.value === "string" ? item.value : "", (value) => this.save(item.key, value.trim()));
						this.o.tui.requestRender();
					} else this.save(item.key, picked);
				},
				index >= 0 ? index + 1 : 0,
			);
		};
		void this.tasks.run(
			`asking ${endpoint} for its models`,
			async () => {
				try {
					return { models: (await this.o.call<{ models: string[] }>("settings_models", { endpoint }, { timeoutMs: 60_000 })).models };
				} catch (error) {
					return { models: [] as string[], error: describeError(error) };
				}
			},
			(result) => offer(result.models, "error" in result ? result.error : undefined),
		);
	}

	private listHeight(): number {
		return Math.max(5, rows(this.o.tui) - 14 - (this.prompt.open ? 10 : 0) - (this.tests ? this.tests.length + 1 : 0));
	}

	invalidate(): void {
		// rendered fresh on every call; nothing cached
	}

	/** The list with a header line before each section; `at` maps selectable rows to lines. */
	private lines(): { lines: string[]; at: number } {
		const t = this.o.theme;
		const visible = this.visible;
		const keyWidth = Math.max(10, ...this.items.map((item) => item.key.length));
		const lines: string[] = [];
		let at = 0;
		let group: string | undefined;
		visible.forEach((item, index) => {
			if (item.group !== group) {
				group = item.group;
				lines.push(t.fg("accent", t.bold(`  ${group}`)));
			}
			const selected = index === this.selected;
			if (selected) at = lines.length;
			const mark = selected ? t.fg("accent", "› ") : "  ";
			const key = selected ? t.fg("accent", cell(item.key, keyWidth)) : cell(item.key, keyWidth);
			const source = item.source === "default" ? t.fg("dim", cell(item.source, 7)) : t.fg("warning", cell(item.source, 7));
			const value = item.problem
				? t.fg("error", item.problem)
				: displayValue(item.value) + (item.is_default ? "" : t.fg("dim", `  (default ${displayValue(item.default)})`));
			lines.push(`${mark}  ${key}  ${source}  ${value}`);
		});
		if (this.loaded && visible.length === 0) lines.push(t.fg("warning", "  No matching settings"));
		const testSelected = this.selected >= visible.length;
		if (testSelected) at = lines.length;
		lines.push((testSelected ? t.fg("accent", "› ") : "  ") + (testSelected ? t.fg("accent", TEST_ROW) : TEST_ROW));
		return { lines, at };
	}

	render(width: number): string[] {
		const t = this.o.theme;
		this.selected = Math.min(this.selected, this.rowCount - 1);
		const out = [titleBar(t, "realmem · settings", width)];
		out.push(...this.search.render(width));
		const keyWidth = Math.max(10, ...this.items.map((item) => item.key.length));
		out.push(t.fg("dim", `    ${cell("key", keyWidth)}  ${cell("source", 7)}  value`));
		const { lines, at } = this.lines();
		const height = this.listHeight();
		const start = Math.max(0, Math.min(at - Math.floor(height / 2), lines.length - height));
		out.push(...lines.slice(start, start + height));
		if (lines.length > height) out.push(t.fg("dim", `  (${Math.min(this.selected + 1, this.rowCount)}/${this.rowCount})`));
		if (!this.loaded) out.push(t.fg("dim", "  loading…"));
		// The selected setting's description, like Pi's /settings.
		const item = this.visible[this.selected];
		out.push("");
		if (item) {
			const about = `${item.description} Default: ${displayValue(item.default)}; env ${item.env}.`;
			out.push(...wrap(about, width - 2).map((line) => t.fg("muted", `  ${line}`)));
		} else {
			out.push(t.fg("muted", "  Reach every configured endpoint and resolve its model like a real call."));
		}
		if (this.tests) {
			out.push(t.fg("muted", "Connections:"));
			for (const r of this.tests) out.push(`  ${r.ok ? t.fg("success", "✓") : t.fg("error", "✗")} ${r.endpoint}: ${r.message}`);
		}
		out.push(...this.tasks.statusLines(t, width));
		out.push(...this.prompt.render(width));
		out.push(t.fg("dim", "type to search · ↑↓ move · enter edit · ctrl+t test connections · esc clears search / closes"));
		return fit(out, width);
	}
}
