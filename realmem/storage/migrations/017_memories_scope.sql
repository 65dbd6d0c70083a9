-- Session start and the prompt read, per store, which memories are about paths other than the
-- store root, and when they were updated (missing paths, the freshness history, path notes and
-- the prompt's counts).  Scanning the memories table for that read every fact's text along
-- with them.  This index holds only those columns, so the same reads touch far fewer
-- pages.
CREATE INDEX memories_scope ON memories(store, paths, quarantined, updated, id);
