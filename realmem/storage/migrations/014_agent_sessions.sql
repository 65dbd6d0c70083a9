-- Sessions of agents served through hooks (Claude Code): not memory state and not a projection
-- of the event log, but what the Pi adapter keeps in its session entries: the <realmem>
-- section computed once per session (reused byte-identically) and the ids of path notes
-- already shown in it (cleared when the agent compacts its context).
CREATE TABLE agent_sessions (
  agent TEXT NOT NULL,
  session TEXT NOT NULL,
  cwd TEXT NOT NULL,
  section TEXT NOT NULL,
  started REAL NOT NULL,
  seen REAL NOT NULL,
  PRIMARY KEY (agent, session)
);
CREATE INDEX agent_sessions_seen ON agent_sessions(seen);
CREATE TABLE agent_shown (
  agent TEXT NOT NULL,
  session TEXT NOT NULL,
  id TEXT NOT NULL,
  PRIMARY KEY (agent, session, id)
);
