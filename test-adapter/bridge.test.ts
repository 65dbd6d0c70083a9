/**
 * The Pi model bridge against pi-ai's faux provider: OpenAI wire format in, pi-ai call out.
 */
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { type Context, fauxAssistantMessage, registerFauxProvider } from "@mariozechner/pi-ai";
import { ModelBridge } from "../extensions/realmem/bridge.js";

describe("Pi model bridge", () => {
	const faux = registerFauxProvider({ provider: "bridge-faux", models: [{ id: "rewriter-1" }] });
	const seen: Array<{ context: Context; apiKey?: string }> = [];
	let home: string;
	let bridge: ModelBridge;
	let auth: { ok: true; apiKey?: string; headers?: Record<string, string> } | { ok: false; error: string } = {
		ok: true,
		apiKey: "pi-key",
	};

	before(async () => {
		home = await mkdtemp(join(tmpdir(), "realmem-bridge-"));
		bridge = await ModelBridge.start({ model: () => faux.getModel(), auth: async () => auth }, { home });
	});

	after(async () => {
		await bridge.close();
		faux.unregister();
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
			[["rewriter-1", "bridge-faux"]],
		);
	});

	test("forwards chat completions to the current model with Pi's credentials", async () => {
		faux.setResponses([
			(context, options) => {
				seen.push({ context, apiKey: options?.apiKey });
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
		assert.equal(call?.context.systemPrompt, "You rewrite memories.");
		assert.deepEqual(
			call?.context.messages.map((m) => [m.role, typeof m.content === "string" ? m.content : m.content.map((c) => ("text" in c ? c.text : "")).join("")]),
			[
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

		auth = { ok: false, error: "no key" };
		const unauthorised = await post({ messages: [{ role: "user", content: "x" }] });
		assert.equal(unauthorised.status, 503);
		auth = { ok: true, apiKey: "pi-key" };
	});

	test("close stops listening and removes the file", async () => {
		const other = await ModelBridge.start({ model: () => faux.getModel(), auth: async () => auth }, { home });
		const file = other.file as string;
		await other.close();
		await assert.rejects(stat(file));
		await assert.rejects(fetch(`${other.url}/v1/models`));
	});
});
