/**
 * The Pi model bridge against Pi's model registry: OpenAI wire format in, registry.complete out,
 * to a faux provider whose key lookup also resolves a base URL and an environment, as a provider
 * an extension registers with its own API and gateway does.
 */
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import {
	type Api,
	createFauxCore,
	createProvider,
	fauxAssistantMessage,
	InMemoryCredentialStore,
	type Model,
	type TranscriptContext,
} from "@earendil-works/pi-ai";
import { ModelRegistry, ModelRuntime } from "@earendil-works/pi-coding-agent";
import { type BridgeModelSource, ModelBridge } from "../extensions/realmem/bridge.js";

const GATEWAY_URL = "http://127.0.0.1:9/gateway/v1";

describe("Pi model bridge", () => {
	const faux = createFauxCore({ provider: "bridge-gw", models: [{ id: "rewriter-1" }] });
	const seen: Array<{ context: TranscriptContext; apiKey?: string; baseUrl?: string; env?: Record<string, string> }> = [];
	let home: string;
	let bridge: ModelBridge;
	let registry: ModelRegistry;
	let current: Model<Api> | undefined;
	let sessionGone = false;
	const source: BridgeModelSource = { model: () => current, registry: () => (sessionGone ? undefined : registry) };

	before(async () => {
		home = await mkdtemp(join(tmpdir(), "realmem-bridge-"));
		const runtime = await ModelRuntime.create({
			credentials: new InMemoryCredentialStore(),
			modelsPath: null,
			refreshOnCreate: false,
		});
		// The key lookup answers the gateway's base URL and environment with the key.
		runtime.registerNativeProvider(
			createProvider({
				id: "bridge-gw",
				auth: {
					apiKey: {
						name: "Gateway",
						resolve: async ({ credential }) =>
							credential?.key
								? { auth: { apiKey: credential.key, baseUrl: GATEWAY_URL }, env: { GATEWAY_REGION: "eu" } }
								: undefined,
					},
				},
				models: faux.models,
				api: { stream: faux.stream, streamSimple: faux.streamSimple },
			}),
		);
		await runtime.setRuntimeApiKey("bridge-gw", "pi-key");
		registry = new ModelRegistry(runtime);
		// An extension's OpenAI-compatible provider that needs a key the user has not given.
		registry.registerProvider("needs-key", {
			baseUrl: "http://127.0.0.1:9/v1",
			api: "openai-completions",
			authHeader: true,
			models: [
				{
					id: "m1",
					name: "m1",
					reasoning: false,
					input: ["text"],
					cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
					contextWindow: 8000,
					maxTokens: 1000,
				},
			],
		});
		current = registry.find("bridge-gw", "rewriter-1");
		bridge = await ModelBridge.start(source, { home });
	});

	after(async () => {
		await bridge.close();
		await rm(home, { recursive: true, force: true });
	});

	const post = (body: unknown, token = bridge.token) =>
		fetch(`${bridge.url}/v1/chat/completions`, {
			method: "POST",
			headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
			body: JSON.stringify(body),
		});

	test("publishes {url, token, pid} in a 0600 file under REALMEM_HOME/bridge", async () => {
		assert.equal(bridge.file, join(home, "bridge", `${process.pid}.json`));
		const info = JSON.parse(await readFile(bridge.file as string, "utf8"));
		assert.deepEqual(info, { url: bridge.url, token: bridge.token, pid: process.pid });
		assert.equal((await stat(bridge.file as string)).mode & 0o777, 0o600);
		assert.match(bridge.url, /^http:\/\/127\.0\.0\.1:\d+$/);
	});

	test("refuses requests without the bearer token", async () => {
		const response = await post({ messages: [{ role: "user", content: "hi" }] }, "wrong");
		assert.equal(response.status, 401);
		const models = await fetch(`${bridge.url}/v1/models`);
		assert.equal(models.status, 401);
	});

	test("lists Pi's current model on /v1/models", async () => {
		const response = await fetch(`${bridge.url}/v1/models`, { headers: { authorization: `Bearer ${bridge.token}` } });
		assert.equal(response.status, 200);
		const body = (await response.json()) as { data: Array<{ id: string; owned_by: string }> };
		assert.deepEqual(
			body.data.map((m) => [m.id, m.owned_by]),
			[["rewriter-1", "bridge-gw"]],
		);
	});

	test("forwards chat completions to the current model with Pi's key, base URL and env", async () => {
		faux.setResponses([
			(context, options, _state, model) => {
				seen.push({ context, apiKey: options?.apiKey, baseUrl: model.baseUrl, env: options?.env });
				return fauxAssistantMessage("Rewritten memory");
			},
		]);
		const response = await post({
			model: "ignored",
			messages: [
				{ role: "system", content: "You rewrite memories." },
				{ role: "user", content: [{ type: "text", text: "Old: a" }] },
				{ role: "assistant", content: "Draft" },
				{ role: "user", content: "New: b" },
			],
		});
		assert.equal(response.status, 200);
		const body = (await response.json()) as {
			object: string;
			model: string;
			choices: Array<{ message: { role: string; content: string }; finish_reason: string }>;
		};
		assert.equal(body.object, "chat.completion");
		assert.equal(body.model, "rewriter-1");
		assert.deepEqual(body.choices[0].message, { role: "assistant", content: "Rewritten memory" });
		assert.equal(body.choices[0].finish_reason, "stop");
		const call = seen.at(-1);
		assert.equal(call?.apiKey, "pi-key");
		assert.equal(call?.baseUrl, GATEWAY_URL);
		assert.deepEqual(call?.env, { GATEWAY_REGION: "eu" });
		// The system prompt reaches the provider as the leading system message.
		assert.deepEqual(
			call?.context.messages.map((m) => [m.role, typeof m.content === "string" ? m.content : m.content.map((c) => ("text" in c ? c.text : "")).join("")]),
			[
				["system", "You rewrite memories."],
				["user", "Old: a"],
				["assistant", "Draft"],
				["user", "New: b"],
			],
		);
	});

	test("answers OpenAI-style errors for streaming, bad input, model failures and missing auth", async () => {
		assert.equal((await post({ stream: true, messages: [{ role: "user", content: "x" }] })).status, 400);
		assert.equal((await post({ messages: [] })).status, 400);
		assert.equal((await post({ messages: [{ role: "tool", content: "x" }] })).status, 400);

		faux.setResponses([fauxAssistantMessage("", { stopReason: "error", errorMessage: "rate limited" })]);
		const failed = await post({ messages: [{ role: "user", content: "x" }] });
		assert.equal(failed.status, 502);
		assert.match(((await failed.json()) as { error: { message: string } }).error.message, /rate limited/);

		const gateway = current;
		current = registry.find("needs-key", "m1");
		const unauthorised = await post({ messages: [{ role: "user", content: "x" }] });
		assert.equal(unauthorised.status, 503);
		const advice = ((await unauthorised.json()) as { error: { message: string } }).error.message;
		assert.match(advice, /needs-key\/m1: No API key found/);
		assert.match(advice, /\/login/);

		current = gateway;
		sessionGone = true;
		assert.equal((await post({ messages: [{ role: "user", content: "x" }] })).status, 503);
		sessionGone = false;
	});

	test("close stops listening and removes the file", async () => {
		const other = await ModelBridge.start(source, { home });
		const file = other.file as string;
		await other.close();
		await assert.rejects(stat(file));
		await assert.rejects(fetch(`${other.url}/v1/models`));
	});
});
