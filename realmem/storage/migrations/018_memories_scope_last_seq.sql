-- Session start's missing-path check skips comparing every path-scoped memory's recorded flags
-- when nothing they depend on moved since the last check (realmem/read/missing.py): the newest
-- change of each paths value is read from this index, so last_seq joins its columns.
DROP INDEX memories_scope;
CREATE INDEX memories_scope ON memories(store, paths, quarantined, updated, id, last_seq);
