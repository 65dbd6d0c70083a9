-- `realmem status` counts each store's quarantined memories: without this index the count
-- read every row of the store; the
-- partial index holds only the quarantined rows, so the count costs nothing and writes barely more.
CREATE INDEX memories_quarantined ON memories(store) WHERE quarantined IS NOT NULL;
