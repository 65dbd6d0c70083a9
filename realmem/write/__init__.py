"""Use cases that change the stores outside the gate: direct edits, outside changes, import, git ignore."""
