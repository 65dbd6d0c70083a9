-- realmem schema v1.  The events table is the truth; everything else is a projection
-- (rebuilt by `realmem replay`) or a cache (embeddings, tree summaries, locks).

CREATE TABLE events (
  seq        INTEGER PRIMARY KEY AUTOINCREMENT,
  time       TEXT    NOT NULL,
  type       TEXT    NOT NULL,
  version    INTEGER NOT NULL DEFAULT 1,
  memory_id  TEXT,
  store      TEXT,
  pid        INTEGER NOT NULL,
  session    TEXT,
  payload    TEXT    NOT NULL
);
CREATE INDEX events_memory ON events(memory_id);
CREATE INDEX events_type ON events(type);

CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;

-- Highest event seq each projection has applied.
CREATE TABLE projection_state (
  name TEXT PRIMARY KEY,
  seq  INTEGER NOT NULL
);

-- Known stores: 'global', 'personal:<key>', 'shared:<key>:<root>'; dir is where files live.
CREATE TABLE stores (
  store       TEXT PRIMARY KEY,
  kind        TEXT NOT NULL,
  project_key TEXT,
  root        TEXT,
  dir         TEXT NOT NULL
);

CREATE TABLE memories (
  store       TEXT NOT NULL,
  id          TEXT NOT NULL,
  caption     TEXT NOT NULL,
  content     TEXT NOT NULL,
  paths       TEXT NOT NULL,   -- JSON list in the store's frame
  created     TEXT NOT NULL,
  updated     TEXT NOT NULL,
  file        TEXT NOT NULL,   -- file name inside the store dir
  text        TEXT NOT NULL,   -- exact file bytes (utf-8)
  hash        TEXT NOT NULL,   -- sha256(caption + content), the dedup / embedding key
  source      TEXT NOT NULL,   -- remember | add | edit | merge | import | observed | consolidate | move
  quarantined TEXT,            -- safety category when quarantined, NULL otherwise
  last_seq    INTEGER NOT NULL,
  PRIMARY KEY (store, id)
);
CREATE INDEX memories_id ON memories(id);
CREATE INDEX memories_hash ON memories(hash);

CREATE TABLE counters (
  store             TEXT NOT NULL,
  id                TEXT NOT NULL,
  used_count        INTEGER NOT NULL DEFAULT 0,
  path_inject_count INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (store, id)
);

-- FTS5 over pre-tokenized text (tokens joined by spaces), so unicode61 only splits on spaces.
-- rowid = memories.rowid; quarantined memories are not indexed.
CREATE VIRTUAL TABLE memories_fts USING fts5(
  caption, body,
  tokenize = "unicode61 remove_diacritics 2 separators ' '"
);

-- Path urgency per memory, valid for the content+paths hash it was judged on.
CREATE TABLE urgency (
  store         TEXT NOT NULL,
  id            TEXT NOT NULL,
  valid_for     TEXT NOT NULL,
  score         REAL NOT NULL,
  probabilities TEXT NOT NULL,
  confidence    REAL,
  source        TEXT NOT NULL,
  PRIMARY KEY (store, id)
);

CREATE TABLE missing_paths (
  store     TEXT NOT NULL,
  id        TEXT NOT NULL,
  path      TEXT NOT NULL,
  suggested TEXT,
  PRIMARY KEY (store, id, path)
);

-- Candidates waiting for the judge or embedder, per project.
CREATE TABLE pending (
  candidate_id TEXT PRIMARY KEY,
  project_key  TEXT,
  cwd          TEXT NOT NULL,
  payload      TEXT NOT NULL,
  reason       TEXT NOT NULL,
  attempts     INTEGER NOT NULL DEFAULT 0,
  next_try     TEXT NOT NULL,
  queued_seq   INTEGER NOT NULL
);
CREATE INDEX pending_project ON pending(project_key);

CREATE TABLE imported_files (
  path        TEXT PRIMARY KEY,
  project_key TEXT,
  hash        TEXT NOT NULL,
  facts       INTEGER NOT NULL,
  time        TEXT NOT NULL
);

-- Caches (not projections).
CREATE TABLE embeddings (
  hash        TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  dims        INTEGER NOT NULL,
  vector      BLOB NOT NULL,
  PRIMARY KEY (hash, fingerprint)
);
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TABLE tree_summaries (
  tree_hash TEXT PRIMARY KEY,
  summary   TEXT NOT NULL,
  time      TEXT NOT NULL
);
CREATE TABLE locks (
  name      TEXT PRIMARY KEY,
  owner     TEXT NOT NULL,
  pid       INTEGER NOT NULL,
  host      TEXT NOT NULL,
  acquired  REAL NOT NULL,
  heartbeat REAL NOT NULL,
  ttl       REAL NOT NULL
);

-- Files in stores that could not be read as facts (reported by status and manage).
CREATE TABLE problems (
  store   TEXT NOT NULL,
  file    TEXT NOT NULL,
  problem TEXT NOT NULL,
  message TEXT NOT NULL,
  line    INTEGER,
  digest  TEXT NOT NULL,
  PRIMARY KEY (store, file)
);

-- Cache: what each fact file looked like when realmem last wrote or read it, so a scan
-- only re-reads files whose size or mtime changed.
CREATE TABLE file_stats (
  store    TEXT NOT NULL,
  file     TEXT NOT NULL,
  mtime_ns INTEGER NOT NULL,
  size     INTEGER NOT NULL,
  PRIMARY KEY (store, file)
);

-- Cache: pre-tokenized FTS text per (caption, content, paths), so replay and reindex do not
-- re-run ICU segmentation for text realmem has indexed before.
CREATE TABLE fts_tokens (
  key     TEXT PRIMARY KEY,
  caption TEXT NOT NULL,
  body    TEXT NOT NULL
);
