/**
 * /realmem debug: the dry-run trace of the remember path for one candidate (the core's `debug`
 * text), in a scrollable view. p sets the candidate's paths and runs it again; w writes it for
 * real after a confirm; Esc closes.
 */
import type { Focusable } from "@earendil-works/pi-tui";
import { type CoreCall, fit, keys, Prompt, rows, type Screen, scrollWindow, Tasks, titleBar, type UiHost, type UiTheme, wrap } from "./common.js";

export interface DebugResult {
	text: string;
	details?: { action?: string; trace?: unknown };
}

export interface DebugOptions {
	tui: UiHost;
	theme: UiTheme;
	call: CoreCall;
	cwd: string;
	session: string;
	caption: string;
	content: string;
	paths?: string[];
	done: () => void;
}

export class DebugScreen implements Screen, Focusable {
	result: DebugResult | undefined;
	paths: string[];
	written = false;
	focused = false;
	private scroll = 0;
	private readonly prompt: Prompt;
	private readonly tasks: Tasks;

	constructor(private readonly o: DebugOptions) {
		this.prompt = new Prompt(o.tui, o.theme);
		this.tasks = new Tasks(o.tui);
		this.paths = o.paths ?? [];
		void this.run(false);
	}

	idle(): Promise<void> {
		return this.tasks.idle();
	}

	run(write: boolean): Promise<void> {
		return this.tasks.run(
			write ? "writing" : "dry run",
			() =>
				this.o.call<DebugResult>(
					"debug",
					{
						cwd: this.o.cwd,
						session: this.o.session,
						caption: this.o.caption,
						content: this.o.content,
						...(this.paths.length ? { paths: this.paths } : {}),
						...(write ? { write: true } : {}),
					},
					{ timeoutMs: 300_000 },
				),
			(result) => {
				this.result = result;
				this.scroll = 0;
				if (write) {
					this.written = true;
					this.tasks.info(`Written for real: ${result.details?.action ?? "done"}.`);
				}
			},
		);
	}

	handleInput(data: string): void {
		this.tasks.message = undefined;
		if (this.prompt.open) this.prompt.handleInput(data);
		else if (keys.cancel(data)) return this.o.done();
		else if (keys.up(data)) this.scroll = Math.max(0, this.scroll - 1);
		else if (keys.down(data)) this.scroll += 1;
		else if (keys.pageUp(data)) this.scroll = Math.max(0, this.scroll - this.bodyHeight());
		else if (keys.pageDown(data)) this.scroll += this.bodyHeight();
		else if (keys.letter(data, "p")) {
			this.prompt.input("Candidate paths (comma-separated; empty: none)", this.paths.join(", "), (value) => {
				this.paths = value.split(",").map((p) => p.trim()).filter(Boolean);
				void this.run(false);
			});
		} else if (keys.letter(data, "w")) {
			if (this.written) this.tasks.info("Already written; run /realmem debug again for another candidate.");
			else
				this.prompt.confirm("Write this memory for real?", [this.o.caption, "The remember path runs again and stores what it decides."], () =>
					void this.run(true),
				);
		}
		this.o.tui.requestRender();
	}

	private bodyHeight(): number {
		return Math.max(6, rows(this.o.tui) - 7 - (this.prompt.open ? 6 : 0));
	}

	invalidate(): void {
		// rendered fresh on every call; nothing cached
	}

	render(width: number): string[] {
		const t = this.o.theme;
		const out = [titleBar(t, `realmem · debug${this.written ? " (written)" : " (dry run)"}`, width)];
		out.push(`${t.fg("muted", "caption")} ${this.o.caption}`);
		out.push(`${t.fg("muted", "paths")} ${this.paths.length ? this.paths.join(", ") : t.fg("dim", "(none)")}`);
		const body = this.result ? wrap(this.result.text, width) : [];
		const view = scrollWindow(t, body, this.scroll, this.bodyHeight());
		this.scroll = view.scroll;
		out.push(...view.lines);
		out.push(...this.tasks.statusLines(t, width));
		out.push(...this.prompt.render(width));
		out.push(t.fg("dim", `↑↓ pgup/pgdn scroll · p set paths and re-run${this.written ? "" : " · w write for real"} · esc close`));
		return fit(out, width);
	}
}
