-- `realmem status` reports, per store, its memories, the quarantined ones and those pointing at
-- a path that no longer exists.  Counting them read the whole primary-key index and the
-- missing-path rows; the projector keeps the
-- three counts here instead, and `replay --check` compares them with a rebuild.
CREATE TABLE store_sizes (
  store       TEXT PRIMARY KEY,
  memories    INTEGER NOT NULL,
  quarantined INTEGER NOT NULL,
  flagged     INTEGER NOT NULL   -- memories with at least one missing path
);
INSERT INTO store_sizes
SELECT m.store, count(*), count(m.quarantined),
       (SELECT count(DISTINCT p.id) FROM missing_paths p WHERE p.store = m.store)
FROM memories m GROUP BY m.store;
DROP INDEX IF EXISTS memories_quarantined;  -- status no longer counts through it
