/**
 * /realmem settings: every setting with its value and where it comes from (default, file, env).
 * Enter edits one: a model picker for *.model keys (the endpoint's /v1/models, plus "(auto)" and
 * "type a name"), true/false for switches, a one-line input for the rest (empty resets to the
 * default; $VAR / env:VAR references are saved as typed). "Test connections" (or t) reaches every
 * endpoint. Keys are shown masked, as the core returns them.
 */
import type { Focusable, SelectItem } from "@mariozechner/pi-tui";
import { describeError } from "../core.js";
import { type CoreCall, cell, fit, keys, Prompt, rows, type Screen, Tasks, titleBar, type UiHost, type UiTheme } from "./common.js";

export interface SettingItem {
	key: string;
	value: unknown;
	source: string;
}

export interface EndpointTest {
	endpoint: string;
	ok: boolean;
	message: string;
}

const ENDPOINTS = ["semif", "embedding", "rewriter"];
const AUTO = "__auto__";
const TYPE = "__type__";

export interface SettingsOptions {
	tui: UiHost;
	theme: UiTheme;
	call: CoreCall;
	done: () => void;
}

export function displayValue(value: unknown): string {
	if (value === "" || value === null || value === undefined) return "—";
	return typeof value === "string" ? value : JSON.stringify(value);
}

export class SettingsScreen implements Screen, Focusable {
	items: SettingItem[] = [];
	selected = 0;
	tests: EndpointTest[] | undefined;
	focused = false;
	private loaded = false;
	private readonly prompt: Prompt;
	private readonly tasks: Tasks;

	constructor(private readonly o: SettingsOptions) {
		this.prompt = new Prompt(o.tui, o.theme);
		this.tasks = new Tasks(o.tui);
		void this.reload();
	}

	idle(): Promise<void> {
		return this.tasks.idle();
	}

	reload(message?: string): Promise<void> {
		return this.tasks.run(
			"loading settings",
			() => this.o.call<{ items: SettingItem[] }>("settings_get", {}),
			(result) => {
				this.items = result.items;
				this.loaded = true;
				if (message) this.tasks.info(message);
			},
		);
	}

	/** Rows: every setting, then the test action. */
	private get rowCount(): number {
		return this.items.length + 1;
	}

	handleInput(data: string): void {
		this.tasks.message = undefined;
		if (this.prompt.open) this.prompt.handleInput(data);
		else if (keys.cancel(data)) return this.o.done();
		else if (keys.up(data)) this.selected = Math.max(0, this.selected - 1);
		else if (keys.down(data)) this.selected = Math.min(this.rowCount - 1, this.selected + 1);
		else if (keys.pageUp(data)) this.selected = Math.max(0, this.selected - this.listHeight());
		else if (keys.pageDown(data)) this.selected = Math.min(this.rowCount - 1, this.selected + this.listHeight());
		else if (keys.letter(data, "t")) this.test();
		else if (keys.enter(data)) {
			const item = this.items[this.selected];
			if (item) this.edit(item);
			else this.test();
		}
		this.o.tui.requestRender();
	}

	/** Select a setting by key (tests and callers that open the screen on one key). */
	select(key: string): boolean {
		const index = this.items.findIndex((item) => item.key === key);
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
				{ value: "", label: "(default)", description: "remove from config.json" },
			];
			return this.prompt.choice(item.key, items, (value) => this.save(item.key, value), item.value ? 0 : 1);
		}
		if (name === "key") {
			return this.prompt.input(
				`${item.key} (now ${displayValue(item.value)})`,
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
			"enter saves · empty resets to the default · esc cancels",
		);
	}

	private pickModel(item: SettingItem, endpoint: string): void {
		const offer = (models: string[], error?: string) => {
			const choices: SelectItem[] = [
				{ value: AUTO, label: "(auto)", description: "the server's only or first model" },
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
		return Math.max(5, rows(this.o.tui) - 10 - (this.prompt.open ? 10 : 0) - (this.tests ? this.tests.length + 1 : 0));
	}

	invalidate(): void {
		// rendered fresh on every call; nothing cached
	}

	render(width: number): string[] {
		const t = this.o.theme;
		const out = [titleBar(t, "realmem · settings", width)];
		const keyWidth = Math.max(10, ...this.items.map((item) => item.key.length));
		out.push(t.fg("dim", `  ${cell("key", keyWidth)}  ${cell("source", 7)}  value`));
		const height = this.listHeight();
		const start = Math.max(0, Math.min(this.selected - Math.floor(height / 2), this.rowCount - height));
		for (let index = start; index < Math.min(this.rowCount, start + height); index++) {
			const selected = index === this.selected;
			const mark = selected ? t.fg("accent", "› ") : "  ";
			const item = this.items[index];
			if (!item) {
				out.push(mark + (selected ? t.fg("accent", "▶ Test connections") : "▶ Test connections"));
				continue;
			}
			const source = item.source === "default" ? t.fg("dim", cell(item.source, 7)) : t.fg("warning", cell(item.source, 7));
			const key = selected ? t.fg("accent", cell(item.key, keyWidth)) : cell(item.key, keyWidth);
			out.push(`${mark}${key}  ${source}  ${displayValue(item.value)}`);
		}
		if (!this.loaded) out.push(t.fg("dim", "  loading…"));
		if (this.tests) {
			out.push(t.fg("muted", "Connections:"));
			for (const r of this.tests) out.push(`  ${r.ok ? t.fg("success", "✓") : t.fg("error", "✗")} ${r.endpoint}: ${r.message}`);
		}
		out.push(...this.tasks.statusLines(t, width));
		out.push(...this.prompt.render(width));
		out.push(t.fg("dim", "↑↓ move · enter edit · t test connections · esc close"));
		return fit(out, width);
	}
}
