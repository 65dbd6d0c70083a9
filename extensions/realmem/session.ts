/**
 * What realmem keeps in the Pi session file, and how it is read back from the current branch.
 *
 * Two custom entry types (they never reach the model):
 * - `realmem-snapshot` {text}: the <realmem> system-prompt section, computed once per session so
 *   the prompt stays byte-identical (prompt cache) across turns, reload and resume.
 * - `realmem-shown` {ids, calls}: memory ids whose path notes were appended to tool results in
 *   one turn. `calls` maps tool call id -> ids, so after a compaction the notes that were only in
 *   summarized tool results count as not shown any more (the summary does not carry them).
 *
 * Reading from `getBranch()` (root -> leaf) instead of all entries makes tree navigation, fork
 * and resume behave: another branch's notes were never seen on this one.
 */
import type { SessionEntry } from "@earendil-works/pi-coding-agent";

export const SNAPSHOT_ENTRY = "realmem-snapshot";
export const SHOWN_ENTRY = "realmem-shown";

export interface SnapshotData {
	text: string;
	/**
	 * Context files cut from the prompt, decided with the snapshot: an import during the session
	 * strips from the next session on. Absent in entries written before this field existed.
	 */
	stripped?: string[];
}

export interface ShownData {
	ids: string[];
	calls?: Record<string, string[]>;
}

/** The snapshot stored on this branch, or undefined when the branch has none yet. */
export function findSnapshot(branch: readonly SessionEntry[]): SnapshotData | undefined {
	for (let i = branch.length - 1; i >= 0; i--) {
		const entry = branch[i];
		if (entry.type === "custom" && entry.customType === SNAPSHOT_ENTRY) {
			const data = entry.data as Partial<SnapshotData> | undefined;
			if (typeof data?.text !== "string") continue;
			const stripped = Array.isArray(data.stripped) ? data.stripped.filter((p) => typeof p === "string") : undefined;
			return stripped ? { text: data.text, stripped } : { text: data.text };
		}
	}
	return undefined;
}

/**
 * Index of the first branch entry whose content is still in the model's context: 0 without a
 * compaction; after one, the latest compaction's firstKeptEntryId (or the entry after the
 * compaction when that id is not on this branch, which is what Pi itself falls back to).
 */
export function contextStart(branch: readonly SessionEntry[]): number {
	for (let i = branch.length - 1; i >= 0; i--) {
		const entry = branch[i];
		if (entry.type !== "compaction") continue;
		const kept = branch.findIndex((candidate) => candidate.id === entry.firstKeptEntryId);
		return kept >= 0 ? kept : i + 1;
	}
	return 0;
}

/** Ids of memories whose notes the model can still see on this branch. */
export function shownIdsOnBranch(branch: readonly SessionEntry[]): Set<string> {
	const start = contextStart(branch);
	const shown = new Set<string>();
	let resultIndex: Map<string, number> | undefined;
	const toolResultIndex = (toolCallId: string): number | undefined => {
		if (!resultIndex) {
			resultIndex = new Map();
			branch.forEach((entry, index) => {
				if (entry.type === "message" && entry.message.role === "toolResult") {
					resultIndex?.set(entry.message.toolCallId, index);
				}
			});
		}
		return resultIndex.get(toolCallId);
	};
	branch.forEach((entry, index) => {
		if (entry.type !== "custom" || entry.customType !== SHOWN_ENTRY || index < start) return;
		const data = entry.data as Partial<ShownData> | undefined;
		if (!data || !Array.isArray(data.ids)) return;
		if (start === 0 || !data.calls) {
			for (const id of data.ids) if (typeof id === "string") shown.add(id);
			return;
		}
		// A turn can straddle the compaction cut (split turn): only notes in kept tool results count.
		const attributed = new Set<string>();
		for (const [toolCallId, ids] of Object.entries(data.calls)) {
			if (!Array.isArray(ids)) continue;
			const at = toolResultIndex(toolCallId);
			for (const id of ids) {
				attributed.add(id);
				if (at === undefined || at >= start) shown.add(id);
			}
		}
		for (const id of data.ids) if (typeof id === "string" && !attributed.has(id)) shown.add(id);
	});
	return shown;
}

/**
 * Paths touched recently in this session, most recent first, without duplicates, bounded. Recall
 * ranks memories about them first (the ranking itself is the core's).
 */
export class RecentPaths {
	private paths: string[] = [];
	constructor(private readonly limit = 20) {}

	add(touched: readonly string[]): void {
		if (touched.length === 0) return;
		// One call's paths have no order among themselves; they all come before older ones.
		const fresh = [...new Set(touched)];
		const seen = new Set(fresh);
		this.paths = [...fresh, ...this.paths.filter((path) => !seen.has(path))].slice(0, this.limit);
	}

	list(): string[] {
		return [...this.paths];
	}
}
