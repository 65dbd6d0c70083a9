/**
 * Transport tests of the rpc client against a protocol-only fake child (fixtures/fake-core.mjs).
 * The real core is exercised end to end in session.test.ts.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { RpcClient, RpcCode, RpcError } from "../extensions/realmem/rpc.js";

const FAKE = join(import.meta.dirname, "fixtures", "fake-core.mjs");
const clients: RpcClient[] = [];

function client(options: Partial<ConstructorParameters<typeof RpcClient>[0]> = {}): RpcClient {
	const created = new RpcClient({ command: process.execPath, args: [FAKE], ...options });
	clients.push(created);
	return created;
}

after(async () => {
	await Promise.all(clients.map((c) => c.close(200)));
});

describe("rpc client", () => {
	test("round-trips requests and matches concurrent answers by id", async () => {
		const rpc = client();
		const answers = await Promise.all(
			[1, 2, 3].map((n) => rpc.call<{ params: { n: number; text: string } }>("echo", { n, text: "naïve ✓ 漢字" })),
		);
		assert.deepEqual(
			answers.map((a) => a.params.n),
			[1, 2, 3],
		);
		assert.equal(answers[0].params.text, "naïve ✓ 漢字");
	});

	test("turns error objects into RpcError with the core's code and message", async () => {
		const rpc = client();
		await assert.rejects(rpc.call("refuse"), (error: unknown) => {
			assert.ok(error instanceof RpcError);
			assert.equal(error.code, RpcCode.refused);
			assert.equal(error.message, "refused: contains a secret");
			return true;
		});
	});

	test("routes progress notifications by token and cancels through the token", async () => {
		const rpc = client();
		const seen: string[] = [];
		const done = await rpc.call<{ text: string }>(
			"slow",
			{ steps: 3, progress_token: "t1" },
			{ onProgress: (p) => seen.push(`${p.message} ${p.done}/${p.total}`) },
		);
		assert.equal(done.text, "done");
		assert.deepEqual(seen, ["step 1 1/3", "step 2 2/3", "step 3 3/3"]);

		const abort = new AbortController();
		const pending = rpc.call("slow", { steps: 50, progress_token: "t2" }, { signal: abort.signal, onProgress: () => abort.abort() });
		await assert.rejects(pending, (error: unknown) => error instanceof RpcError && error.message === "cancelled");
	});

	test("times out a request without killing the child", async () => {
		const rpc = client();
		const first = await rpc.call<{ pid: number }>("echo");
		await assert.rejects(rpc.call("hang", {}, { timeoutMs: 100 }), (error: unknown) => {
			return error instanceof RpcError && error.code === RpcCode.timeout && /hang timed out/.test(error.message);
		});
		const again = await rpc.call<{ pid: number }>("echo");
		assert.equal(again.pid, first.pid);
	});

	test("fails in-flight requests when the child dies and restarts it on the next call", async () => {
		const rpc = client();
		const first = await rpc.call<{ pid: number }>("echo");
		const hanging = rpc.call("hang", {}, { timeoutMs: 0 });
		await assert.rejects(rpc.call("crash"), (error: unknown) => {
			assert.ok(error instanceof RpcError);
			assert.equal(error.code, RpcCode.unavailable);
			assert.match(error.message, /exited \(code 3\): boom: simulated failure/);
			return true;
		});
		await assert.rejects(hanging, (error: unknown) => error instanceof RpcError && error.code === RpcCode.unavailable);
		const second = await rpc.call<{ pid: number }>("echo");
		assert.notEqual(second.pid, first.pid);
	});

	test("reports a missing core clearly and keeps failing fast instead of respawning", async () => {
		const rpc = client({ command: "/nonexistent/realmem", args: ["rpc"] });
		await assert.rejects(rpc.call("hello"), (error: unknown) => {
			assert.ok(error instanceof RpcError);
			assert.equal(error.code, RpcCode.unavailable);
			assert.equal(error.message, "realmem core not found (/nonexistent/realmem). Restart Pi to set it up, or set REALMEM_BIN.");
			return true;
		});
		await assert.rejects(rpc.call("hello"), /realmem core not found/);
	});

	test("close ends the child and refuses later calls", async () => {
		const rpc = client();
		await rpc.call("echo");
		assert.equal(rpc.running, true);
		await rpc.close(500);
		assert.equal(rpc.running, false);
		await assert.rejects(rpc.call("echo"), /shut down/);
	});
});
