"""The read side: recall, path notes, the prompt section, freshness, status and the texts they render."""
