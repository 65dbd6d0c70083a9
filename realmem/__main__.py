"""``python -m realmem``: the CLI.  Installed hook and MCP entries run this name, which stays put
when modules move."""

from realmem.interface.cli import main

main()
