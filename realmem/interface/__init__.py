"""Front ends over one command layer: the CLI, the rpc child, the commands and tools, bench and eval."""
