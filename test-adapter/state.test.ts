/**
 * How the adapter reads its session entries back from a branch (pure functions over entries).
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { SessionEntry } from "@earendil-works/pi-coding-agent";
import { findSnapshot, RecentPaths, shownIdsOnBranch } from "../extensions/realmem/session.js";

let counter = 0;
const base = () => ({ id: `e${++counter}`, parentId: null, timestamp: new Date(0).toISOString() });
const custom = (customType: string, data: unknown) => ({ ...base(), type: "custom", customType, data }) as SessionEntry;
const shown = (ids: string[], calls?: Record<string, string[]>) => custom("realmem-shown", { ids, calls });
const toolResult = (toolCallId: string) =>
	({
		...base(),
		type: "message",
		message: { role: "toolResult", toolCallId, toolName: "read", content: [], isError: false, timestamp: 0 },
	}) as SessionEntry;
const user = () => ({ ...base(), type: "message", message: { role: "user", content: "x", timestamp: 0 } }) as SessionEntry;
const compaction = (firstKeptEntryId: string) =>
	({ ...base(), type: "compaction", summary: "s", firstKeptEntryId, tokensBefore: 1 }) as SessionEntry;

describe("session entries", () => {
	test("the latest snapshot on the branch wins; none means undefined", () => {
		assert.equal(findSnapshot([user()]), undefined);
		assert.deepEqual(findSnapshot([custom("realmem-snapshot", { text: "a" }), user(), custom("realmem-snapshot", { text: "" })]), { text: "" });
		// The stripped set travels with the snapshot; an old entry without it says so (undefined).
		assert.deepEqual(findSnapshot([custom("realmem-snapshot", { text: "a", stripped: ["/p/AGENTS.md", 3] })]), {
			text: "a",
			stripped: ["/p/AGENTS.md"],
		});
	});

	test("shown ids accumulate over the branch", () => {
		const branch = [user(), toolResult("c1"), shown(["A"], { c1: ["A"] }), user(), shown(["B", "C"])];
		assert.deepEqual([...shownIdsOnBranch(branch)].sort(), ["A", "B", "C"]);
	});

	test("after a compaction only notes in kept tool results count", () => {
		const oldUser = user();
		const oldResult = toolResult("c1");
		const keptUser = user();
		const keptResult = toolResult("c2");
		const branch = [
			oldUser,
			oldResult,
			shown(["A"], { c1: ["A"] }),
			keptUser,
			keptResult,
			shown(["B"], { c2: ["B"] }),
			compaction(keptUser.id),
			user(),
			shown(["C"]),
		];
		assert.deepEqual([...shownIdsOnBranch(branch)].sort(), ["B", "C"]);
	});

	test("a turn split by the compaction cut keeps only its kept tool results' notes", () => {
		const splitStart = user();
		const early = toolResult("c1");
		const keptResult = toolResult("c2");
		const branch = [splitStart, early, keptResult, shown(["A", "B"], { c1: ["A"], c2: ["B"] }), compaction(keptResult.id)];
		assert.deepEqual([...shownIdsOnBranch(branch)], ["B"]);
	});

	test("an unknown firstKeptEntryId keeps only what follows the compaction", () => {
		const branch = [user(), shown(["A"]), compaction("missing"), shown(["B"])];
		assert.deepEqual([...shownIdsOnBranch(branch)], ["B"]);
	});

	test("recent paths: most recent first, unique, bounded", () => {
		const recent = new RecentPaths(3);
		recent.add(["/p/a", "/p/b"]);
		recent.add(["/p/c", "/p/a"]);
		recent.add([]);
		assert.deepEqual(recent.list(), ["/p/c", "/p/a", "/p/b"]);
		recent.add(["/p/d"]);
		assert.deepEqual(recent.list(), ["/p/d", "/p/c", "/p/a"]);
	});
});
