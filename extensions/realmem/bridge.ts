/**
 * Pi model bridge: a loopback OpenAI-compatible endpoint that forwards to the model Pi is using.
 *
 * The core rewrites memories (Edit/Merge, consolidation) and asks the chat judge through an
 * OpenAI chat-completions client. By serving that API here and forwarding through Pi's model
 * registry (ctx.modelRegistry.complete), both work with whatever provider, credentials and base
 * URL the user or another extension configured in Pi, with no key in realmem's config.
 *
 * Security: bound to 127.0.0.1 only, every request needs the random bearer token, and the token
 * is published only in a 0600 file in REALMEM_HOME (bridge/<pid>.json, for the worker process)
 * and over the rpc pipe (for the rpc child).
 */
import { randomBytes, timingSafeEqual } from "node:crypto";
import { rmSync } from "node:fs";
import { chmod, mkdir, rename, rm, writeFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import type { Api, AssistantMessage, Context, Message, Model, TextContent } from "@earendil-works/pi-ai";
import type { ModelRegistry } from "@earendil-works/pi-coding-agent";

/** The part of Pi's model registry (ctx.modelRegistry) the bridge calls. */
export type BridgeRegistry = Pick<ModelRegistry, "getApiKeyAndHeaders" | "complete">;

/** What the bridge needs from Pi, read at request time so model switches apply at once. */
export interface BridgeModelSource {
	model(): Model<Api> | undefined;
	/** undefined once the Pi session is gone. */
	registry(): BridgeRegistry | undefined;
}

export interface BridgeInfo {
	url: string;
	token: string;
	pid: number;
}

const MAX_BODY_BYTES = 8 * 1024 * 1024;

class HttpError extends Error {
	constructor(
		readonly status: number,
		message: string,
		readonly type = "invalid_request_error",
	) {
		super(message);
	}
}

interface ChatMessage {
	role?: unknown;
	content?: unknown;
}

function textOf(content: unknown): string {
	if (typeof content === "string") return content;
	if (Array.isArray(content)) {
		return content
			.map((part: { type?: unknown; text?: unknown }) =>
				part && part.type === "text" && typeof part.text === "string" ? part.text : "",
			)
			.join("");
	}
	if (content === null || content === undefined) return "";
	throw new HttpError(400, "message content must be a string or an array of text parts");
}

/** OpenAI chat messages -> pi-ai Context. Only text is supported; the core sends nothing else. */
export function toContext(messages: unknown, model: Model<Api>): Context {
	if (!Array.isArray(messages) || messages.length === 0) throw new HttpError(400, "messages must be a non-empty array");
	const system: string[] = [];
	const out: Message[] = [];
	const now = Date.now();
	for (const raw of messages as ChatMessage[]) {
		const text = textOf(raw?.content);
		switch (raw?.role) {
			case "system":
			case "developer":
				system.push(text);
				break;
			case "user":
				out.push({ role: "user", content: text, timestamp: now });
				break;
			case "assistant":
				// pi-ai replays history as the current model's own turns.
				out.push({
					role: "assistant",
					content: [{ type: "text", text }],
					api: model.api,
					provider: model.provider,
					model: model.id,
					usage: {
						input: 0,
						output: 0,
						cacheRead: 0,
						cacheWrite: 0,
						totalTokens: 0,
						cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
					},
					stopReason: "stop",
					timestamp: now,
				});
				break;
			default:
				throw new HttpError(400, `unsupported message role: ${String(raw?.role)}`);
		}
	}
	const context: Context = { messages: out };
	if (system.length > 0) context.systemPrompt = system.join("\n\n");
	return context;
}

export function toCompletion(message: AssistantMessage, model: Model<Api>) {
	const text = message.content
		.filter((block): block is TextContent => block.type === "text")
		.map((block) => block.text)
		.join("");
	return {
		id: `chatcmpl-${message.responseId ?? randomBytes(12).toString("hex")}`,
		object: "chat.completion",
		created: Math.floor(message.timestamp / 1000),
		model: model.id,
		choices: [
			{
				index: 0,
				message: { role: "assistant", content: text },
				finish_reason: message.stopReason === "length" ? "length" : "stop",
			},
		],
		usage: {
			prompt_tokens: message.usage.input + message.usage.cacheRead + message.usage.cacheWrite,
			completion_tokens: message.usage.output,
			total_tokens: message.usage.totalTokens,
		},
	};
}

function readBody(req: IncomingMessage): Promise<string> {
	return new Promise((resolve, reject) => {
		const chunks: Buffer[] = [];
		let size = 0;
		req.on("data", (chunk: Buffer) => {
			size += chunk.length;
			if (size > MAX_BODY_BYTES) {
				reject(new HttpError(413, "request body too large"));
				req.destroy();
				return;
			}
			chunks.push(chunk);
		});
		req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
		req.on("error", reject);
	});
}

function send(res: ServerResponse, status: number, body: unknown): void {
	if (res.headersSent || res.destroyed) return;
	const payload = JSON.stringify(body);
	res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(payload) });
	res.end(payload);
}

function sendError(res: ServerResponse, error: unknown): void {
	if (error instanceof HttpError) {
		send(res, error.status, { error: { message: error.message, type: error.type } });
	} else {
		const message = error instanceof Error ? error.message : String(error);
		send(res, 500, { error: { message, type: "server_error" } });
	}
}

export class ModelBridge {
	/** A bridge file outliving its process would point the worker at a dead port. */
	private readonly removeFileOnExit = () => {
		if (this.file) rmSync(this.file, { force: true });
	};

	private constructor(
		private readonly server: Server,
		readonly url: string,
		readonly token: string,
		readonly file: string | undefined,
	) {
		if (file) process.once("exit", this.removeFileOnExit);
	}

	/**
	 * Listen on 127.0.0.1 at a random port. With `home`, publish {url, token, pid} in
	 * `<home>/bridge/<pid>.json` (mode 0600) for the worker process.
	 */
	static async start(source: BridgeModelSource, options: { home?: string } = {}): Promise<ModelBridge> {
		const token = randomBytes(32).toString("base64url");
		const expected = Buffer.from(`Bearer ${token}`);
		const server = createServer((req, res) => {
			const given = Buffer.from(req.headers.authorization ?? "");
			if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
				send(res, 401, { error: { message: "invalid bearer token", type: "authentication_error" } });
				req.resume();
				return;
			}
			ModelBridge.handle(source, req, res).catch((error) => sendError(res, error));
		});
		await new Promise<void>((resolve, reject) => {
			server.once("error", reject);
			server.listen(0, "127.0.0.1", () => {
				server.off("error", reject);
				resolve();
			});
		});
		// Never keep Pi alive just because the bridge listens.
		server.unref();
		const port = (server.address() as AddressInfo).port;
		const url = `http://127.0.0.1:${port}`;
		let file: string | undefined;
		if (options.home) {
			const dir = join(options.home, "bridge");
			file = join(dir, `${process.pid}.json`);
			const info: BridgeInfo = { url, token, pid: process.pid };
			try {
				await mkdir(dir, { recursive: true, mode: 0o700 });
				const tmp = `${file}.${randomBytes(4).toString("hex")}.tmp`;
				await writeFile(tmp, `${JSON.stringify(info)}\n`, { mode: 0o600 });
				await chmod(tmp, 0o600);
				await rename(tmp, file);
			} catch (error) {
				server.close();
				throw error;
			}
		}
		return new ModelBridge(server, url, token, file);
	}

	private static async handle(source: BridgeModelSource, req: IncomingMessage, res: ServerResponse): Promise<void> {
		const path = (req.url ?? "/").split("?")[0].replace(/\/+$/, "");
		if (req.method === "GET" && path === "/v1/models") {
			req.resume();
			const model = source.model();
			const data = model ? [{ id: model.id, object: "model", created: 0, owned_by: model.provider }] : [];
			send(res, 200, { object: "list", data });
			return;
		}
		if (req.method !== "POST" || path !== "/v1/chat/completions") {
			req.resume();
			throw new HttpError(404, `no route for ${req.method} ${path}`, "not_found_error");
		}
		const raw = await readBody(req);
		let body: {
			messages?: unknown;
			stream?: unknown;
			max_tokens?: unknown;
			max_completion_tokens?: unknown;
			temperature?: unknown;
		};
		try {
			body = JSON.parse(raw);
		} catch {
			throw new HttpError(400, "body is not JSON");
		}
		if (body.stream === true) throw new HttpError(400, "streaming is not supported by the Pi model bridge");
		const model = source.model();
		if (!model) throw new HttpError(503, "Pi has no model selected", "server_error");
		const registry = source.registry();
		if (!registry) throw new HttpError(503, "the Pi session is gone", "server_error");
		// Looked up first so a missing key is a 503 with advice, not an upstream (502) failure;
		// the core then uses rewriter.url or its fallback.
		const auth = await registry.getApiKeyAndHeaders(model);
		if (!auth.ok) {
			throw new HttpError(
				503,
				`no credentials for ${model.provider}/${model.id}: ${auth.error}. Log in to it in Pi (/login), pick another model (/model), or set realmem's rewriter.url`,
				"server_error",
			);
		}
		const context = toContext(body.messages, model);
		// Abort the upstream call when the client goes away (e.g. its own timeout fired).
		const abort = new AbortController();
		res.on("close", () => {
			if (!res.writableEnded) abort.abort();
		});
		const maxTokens = body.max_completion_tokens ?? body.max_tokens;
		// A provider may resolve its own base URL and environment with the key (an extension's
		// provider, a gateway): the request goes where and as the lookup says.
		const target = auth.baseUrl ? { ...model, baseUrl: auth.baseUrl } : model;
		const message = await registry.complete(target, context, {
			apiKey: auth.apiKey,
			headers: auth.headers,
			...(auth.env ? { env: auth.env } : {}),
			signal: abort.signal,
			...(typeof maxTokens === "number" ? { maxTokens } : {}),
			...(typeof body.temperature === "number" ? { temperature: body.temperature } : {}),
		});
		if (message.stopReason === "error" || message.stopReason === "aborted") {
			throw new HttpError(502, message.errorMessage ?? `model call ${message.stopReason}`, "upstream_error");
		}
		send(res, 200, toCompletion(message, model));
	}

	/** Stop listening, drop open connections and remove the published file. */
	async close(): Promise<void> {
		await new Promise<void>((resolve) => {
			this.server.close(() => resolve());
			this.server.closeAllConnections();
		});
		process.removeListener("exit", this.removeFileOnExit);
		if (this.file) await rm(this.file, { force: true });
	}
}
