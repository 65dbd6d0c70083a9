"""Front ends for agents other than Pi: the MCP server, Claude Code hooks and their installer."""
