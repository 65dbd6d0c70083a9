/**
 * A real Pi session for adapter tests, with no network: the SDK's createAgentSession, pi-ai's
 * faux provider scripting the assistant, the realmem extension loaded by path, and the real
 * Python core (`realmem rpc`) behind it. HOME, REALMEM_HOME and Pi's agent dir are temp dirs,
 * so nothing touches the real ~/.pi.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { readdirSync, readFileSync, realpathSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import {
	type AssistantMessage,
	type Context,
	type FauxProviderHandle,
	fauxAssistantMessage,
	fauxProvider,
	fauxToolCall,
	getSystemMessageText,
	InMemoryCredentialStore,
	type JsonObject,
	type TranscriptContext,
} from "@earendil-works/pi-ai";
import {
	type AgentSession,
	createAgentSession,
	DefaultResourceLoader,
	type ExtensionFactory,
	type ExtensionUIContext,
	ModelRuntime,
	SessionManager,
	SettingsManager,
} from "@earendil-works/pi-coding-agent";

export const REPO = resolve(import.meta.dirname, "..");
export const EXTENSION = join(REPO, "extensions", "realmem", "index.ts");
export const REAL_CORE = join(REPO, ".venv", "bin", "realmem");
export const PYTHON = join(REPO, ".venv", "bin", "python");

export interface Fakes {
	proc: ChildProcess;
	/** Base URL per kind ("semif", "chat", ...), as `python -m realmem.fakes` prints them. */
	urls: Record<string, string>;
	stop(): Promise<void>;
}

/** Starts realmem's fake endpoints (`python -m realmem.fakes --<kind> ...`) on 127.0.0.1. */
export async function startFakes(kinds: string[], env: NodeJS.ProcessEnv = process.env): Promise<Fakes> {
	const proc = spawn(PYTHON, ["-m", "realmem.fakes", ...kinds.map((kind) => `--${kind}`), "--watch-stdin"], {
		env,
		stdio: ["pipe", "pipe", "pipe"],
	});
	let stderr = "";
	proc.stderr?.on("data", (chunk) => {
		stderr += chunk;
	});
	const lines = createInterface({ input: proc.stdout as NodeJS.ReadableStream });
	const urls = await new Promise<Record<string, string>>((resolve, reject) => {
		const found: Record<string, string> = {};
		const timer = setTimeout(() => reject(new Error(`fake servers did not start: ${stderr}`)), 20_000);
		proc.once("exit", (code) => {
			clearTimeout(timer);
			reject(new Error(`fake servers exited (${code}): ${stderr}`));
		});
		lines.on("line", (line) => {
			const match = /^(\S+) (http\S+)/.exec(line);
			if (match) found[match[1]] = match[2];
			if (line === "ready") {
				clearTimeout(timer);
				resolve(found);
			}
		});
	});
	const stop = async () => {
		if (proc.exitCode !== null || proc.signalCode !== null) return;
		const exited = new Promise((resolve) => proc.once("exit", resolve));
		proc.stdin?.end();
		proc.kill("SIGTERM");
		await exited;
	};
	return { proc, urls, stop };
}

export interface TestEnv {
	root: string;
	home: string;
	realmemHome: string;
	agentDir: string;
	sessionDir: string;
	/** A git repository with one commit: the project the session works in. */
	cwd: string;
	cleanup(): Promise<void>;
}

/** Temp HOME / REALMEM_HOME / agent dir and a committed git project, set in process.env. */
export async function createEnv(files: Record<string, string> = {}): Promise<TestEnv> {
	const root = await mkdtemp(join(tmpdir(), "realmem-adapter-"));
	const env: TestEnv = {
		root,
		home: join(root, "home"),
		realmemHome: join(root, "realmem-home"),
		agentDir: join(root, "agent"),
		sessionDir: join(root, "agent", "sessions"),
		cwd: join(root, "project"),
		// Stop (and wait for) the workers session_start spawned before removing their home: a
		// worker still writing its log or database into realmem-home fails the rm (ENOTEMPTY).
		cleanup: async () => {
			await stopWorkers(env.realmemHome);
			await rm(root, { recursive: true, force: true });
		},
	};
	for (const dir of [env.home, env.realmemHome, env.agentDir, env.sessionDir, env.cwd]) await mkdir(dir, { recursive: true });
	process.env.HOME = env.home;
	process.env.REALMEM_HOME = env.realmemHome;
	// A worker started by session_start must not outlive the test by minutes.
	process.env.REALMEM_WORKER_IDLESECONDS = "2";
	process.env.PI_CODING_AGENT_DIR = env.agentDir;
	// The core must never reach a network endpoint from tests.
	for (const key of Object.keys(process.env)) if (/^REALMEM_(SEMIF|EMBEDDING|REWRITER|JUDGE)_/.test(key)) delete process.env[key];
	// The faux model plays the agent; a test about the chat judge (judge.test.ts) turns it on and
	// scripts the judge's answers. Everywhere else remember behaves as with no judge at all.
	process.env.REALMEM_JUDGE_FALLBACK = "queue";
	const all = { "README.md": "# demo\n", ...files };
	for (const [path, content] of Object.entries(all)) {
		await mkdir(join(env.cwd, path, ".."), { recursive: true });
		await writeFile(join(env.cwd, path), content);
	}
	const git = (...args: string[]) =>
		execFileSync("git", ["-c", "user.name=Test", "-c", "user.email=test@example.com", ...args], {
			cwd: env.cwd,
			stdio: "pipe",
			env: { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_NOSYSTEM: "1" },
		});
	git("init", "-q", "-b", "main");
	git("add", "-A");
	git("commit", "-q", "-m", "initial");
	return env;
}

/** Pids of `realmem worker` processes serving `realmemHome`. They run detached (a new session,
 * reaped by the rpc child that spawned them), so they are found by their command line. */
function workerPids(realmemHome: string): number[] {
	const home = realpathSync(realmemHome);
	const pids: number[] = [];
	for (const name of readdirSync("/proc")) {
		if (!/^\d+$/.test(name)) continue;
		let args: string[];
		try {
			args = readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0");
		} catch {
			continue; // exited meanwhile
		}
		const at = args.indexOf("--home");
		if (at >= 0 && args[at + 1] === home && args.includes("worker")) pids.push(Number(name));
	}
	return pids;
}

function exited(pid: number): boolean {
	try {
		const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
		return stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z"); // a zombie writes nothing
	} catch {
		return true;
	}
}

/** SIGTERM every worker of this home and wait until each has exited (SIGKILL if one lingers). */
export async function stopWorkers(realmemHome: string): Promise<void> {
	const pids = workerPids(realmemHome);
	for (const pid of pids) {
		try {
			process.kill(pid, "SIGTERM");
		} catch {
			// already gone
		}
	}
	for (const pid of pids) {
		try {
			await waitFor(() => exited(pid), `worker ${pid} to stop`, 30_000);
		} catch {
			process.kill(pid, "SIGKILL");
			await waitFor(() => exited(pid), `worker ${pid} to die`, 30_000);
		}
	}
}

export interface Notification {
	message: string;
	level: string | undefined;
}

/** UI that records notifications and answers dialogs from a script; everything else is a no-op. */
export function recordingUI(answers: { confirm?: boolean; select?: string[]; input?: string[] } = {}) {
	const notifications: Notification[] = [];
	const statuses: Array<string | undefined> = [];
	const confirms: Array<{ title: string; message: string }> = [];
	const selects = [...(answers.select ?? [])];
	const inputs = [...(answers.input ?? [])];
	const known: Partial<ExtensionUIContext> = {
		notify: (message, level) => {
			notifications.push({ message, level });
		},
		setStatus: (_key, text) => {
			statuses.push(text);
		},
		confirm: async (title, message) => {
			confirms.push({ title, message });
			return answers.confirm ?? false;
		},
		// A scripted answer picks the first option that starts with it.
		select: async (_title, options) => {
			const want = selects.shift();
			return want === undefined ? undefined : options.find((option) => option.startsWith(want));
		},
		input: async () => inputs.shift(),
		editor: async () => inputs.shift(),
		custom: async () => undefined as never,
		onTerminalInput: () => () => undefined,
		getEditorText: () => "",
		getToolsExpanded: () => false,
		getAllThemes: () => [],
		getTheme: () => undefined,
		setTheme: () => ({ success: false, error: "no themes in tests" }),
		getEditorComponent: () => undefined,
	};
	const ui = new Proxy(known, {
		get: (target, prop: string) => (prop in target ? target[prop as keyof ExtensionUIContext] : () => undefined),
	}) as ExtensionUIContext;
	return { ui, notifications, statuses, confirms };
}

export interface PiHarness {
	session: AgentSession;
	faux: FauxProviderHandle;
	/** System prompts the model received (its leading system message), one per model call. */
	systemPrompts: string[];
	/** Contexts the model received, one per model call: the leading system message as
	 * `systemPrompt`, every later message in `messages`. */
	contexts: Context[];
	notifications: Notification[];
	statuses: Array<string | undefined>;
	extensionErrors: string[];
	/** Queue assistant turns: each item is a tool call ([name, args]), final text, or a function
	 * of the request that returns the text (a judge's answer depends on the ids it was shown). */
	script(...steps: Step[]): void;
	/** Emit session_shutdown (dispose() alone does not) and dispose. */
	close(): Promise<void>;
}

export interface OpenOptions {
	/** Resume this session file (a "reload": a new session object on the same file). */
	sessionFile?: string;
	/** More extensions (e.g. a stand-in for another memory system's tools). */
	extensionFactories?: ExtensionFactory[];
	ui?: ReturnType<typeof recordingUI>;
	/** Compaction settings (auto-compaction stays off; tests compact explicitly). */
	keepRecentTokens?: number;
	/** The extension to load (default: this checkout's), e.g. one installed from a tarball. */
	extension?: string;
}

type Step = string | [string, JsonObject] | ((context: Context) => string);

let fauxCounter = 0;

export async function openPi(env: TestEnv, options: OpenOptions = {}): Promise<PiHarness> {
	const provider = `faux${++fauxCounter}`;
	const faux = fauxProvider({ provider, models: [{ id: "scripted", contextWindow: 200_000 }] });
	const systemPrompts: string[] = [];
	const contexts: Context[] = [];
	const queued: Step[] = [];
	let toolCallCounter = 0;
	const respond = (transcript: TranscriptContext): AssistantMessage => {
		const context = fromTranscript(transcript);
		systemPrompts.push(context.systemPrompt ?? "");
		contexts.push(context);
		const step = queued.shift();
		if (step === undefined) return fauxAssistantMessage("(script exhausted)");
		if (typeof step === "string") return fauxAssistantMessage(step);
		if (typeof step === "function") return fauxAssistantMessage(step(context));
		return fauxAssistantMessage(fauxToolCall(step[0], step[1], { id: `call_${provider}_${++toolCallCounter}` }), {
			stopReason: "toolUse",
		});
	};
	faux.setResponses(Array.from({ length: 200 }, () => respond));

	const settingsManager = SettingsManager.inMemory({
		compaction: { enabled: false, ...(options.keepRecentTokens ? { keepRecentTokens: options.keepRecentTokens } : {}) },
		retry: { enabled: false },
	});
	const loader = new DefaultResourceLoader({
		cwd: env.cwd,
		agentDir: env.agentDir,
		settingsManager,
		additionalExtensionPaths: [options.extension ?? EXTENSION],
		extensionFactories: options.extensionFactories ?? [],
		noExtensions: true,
	});
	await loader.reload();
	const loadErrors = loader.getExtensions().errors;
	if (loadErrors.length) throw new Error(`extension load failed: ${JSON.stringify(loadErrors)}`);

	// No auth.json, no models.json, no catalog refresh: only the faux provider is reachable.
	const modelRuntime = await ModelRuntime.create({
		credentials: new InMemoryCredentialStore(),
		modelsPath: null,
		refreshOnCreate: false,
	});
	modelRuntime.registerNativeProvider(faux.provider);
	const sessionManager = options.sessionFile
		? SessionManager.open(options.sessionFile, env.sessionDir)
		: SessionManager.create(env.cwd, env.sessionDir);
	const { session } = await createAgentSession({
		cwd: env.cwd,
		agentDir: env.agentDir,
		model: faux.getModel(),
		thinkingLevel: "off",
		modelRuntime,
		resourceLoader: loader,
		sessionManager,
		settingsManager,
	});
	const ui = options.ui ?? recordingUI();
	const extensionErrors: string[] = [];
	await session.bindExtensions({
		uiContext: ui.ui,
		onError: (error) => extensionErrors.push(`${error.event}: ${error.error}`),
	});
	return {
		session,
		faux,
		systemPrompts,
		contexts,
		notifications: ui.notifications,
		statuses: ui.statuses,
		extensionErrors,
		script: (...steps) => queued.push(...steps),
		close: async () => {
			await session.extensionRunner.emit({ type: "session_shutdown", reason: "quit" });
			session.dispose();
		},
	};
}

/** The system prompt reaches the provider as a leading system message (pi-ai 1.x). */
function fromTranscript(transcript: TranscriptContext): Context {
	const messages = structuredClone(transcript.messages);
	const first = messages[0];
	if (first?.role !== "system") return { messages };
	return { systemPrompt: getSystemMessageText(first), messages: messages.slice(1) };
}

/** Text of the tool result messages the model saw last, by tool call order. */
export function toolResultTexts(context: Context | undefined): string[] {
	if (!context) return [];
	return context.messages
		.filter((m) => m.role === "toolResult")
		.map((m) => (m.role === "toolResult" ? m.content.map((c) => (c.type === "text" ? c.text : "")).join("") : ""));
}

/** Poll until `check` holds (for work Pi starts without returning a promise, e.g. sendUserMessage). */
export async function waitFor(check: () => boolean, what: string, timeoutMs = 20_000): Promise<void> {
	const deadline = Date.now() + timeoutMs;
	while (!check()) {
		if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
		await new Promise((resolve) => setTimeout(resolve, 25));
	}
}
