"""SQLite and disk plumbing: connections and migrations, the write lease, atomic files, test faults."""
