-- Fencing tokens for the lease lock: every take of a named lease gets the next generation,
-- kept across releases in lease_generations, and the locks row carries the generation of its
-- holder.  A writer checks its generation before each projection write, so a holder whose
-- lease expired (paused, swapped out) writes nothing once another process has taken over.
CREATE TABLE lease_generations (
  name       TEXT PRIMARY KEY,
  generation INTEGER NOT NULL
);
ALTER TABLE locks ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;
