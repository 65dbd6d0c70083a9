-- A full scan reads, per store, every memory's file name and every file's recorded stamp
-- (realmem/write/observe.py).  Each read looked up a table row per memory or file.  With the file
-- name in memories_scope and file_stats kept in its primary key's order, both are one walk
-- of one b-tree.
DROP INDEX memories_scope;
CREATE INDEX memories_scope ON memories(store, paths, quarantined, updated, id, last_seq, file);
CREATE TABLE file_stats_by_key (
  store    TEXT NOT NULL,
  file     TEXT NOT NULL,
  mtime_ns INTEGER NOT NULL,
  size     INTEGER NOT NULL,
  PRIMARY KEY (store, file)
) WITHOUT ROWID;
INSERT INTO file_stats_by_key SELECT store, file, mtime_ns, size FROM file_stats;
DROP TABLE file_stats;
ALTER TABLE file_stats_by_key RENAME TO file_stats;
