"""The wheel as a user installs it, far from the checkout: run by scripts/smoke-wheel.sh with
the fresh virtual environment's Python, in a temp git repository (the checkout is not on
sys.path: ``python -I``).  Adds a fact, recalls it, and lists the MCP server's tools over stdio."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

import realmem

BIN = Path(sys.executable).parent


def realmem_cli(*args: str) -> str:
    done = subprocess.run([str(BIN / "realmem"), *args], capture_output=True, text=True, check=False)
    if done.returncode:
        sys.exit(f"realmem {' '.join(args)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return done.stdout


async def tools() -> list[str]:
    params = StdioServerParameters(command=str(BIN / "realmem"), args=["mcp"], env=dict(os.environ), cwd=os.getcwd())
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return sorted(t.name for t in (await session.list_tools()).tools)


def main() -> None:
    where = Path(realmem.__file__).resolve()
    if "site-packages" not in where.parts:
        sys.exit(f"realmem was imported from {where}, not from the installed wheel")
    realmem_cli("add", "--caption", "Invoices are numbered INV-YYYY-NNNN",
                "--content", "Invoice numbers follow INV-YYYY-NNNN and never reuse a number.")
    found = realmem_cli("recall", "invoice number format")
    if "INV-YYYY-NNNN" not in found:
        sys.exit(f"recall did not find the fact:\n{found}")
    names = anyio.run(tools)
    if "realmem_recall" not in names or "realmem_remember" not in names:
        sys.exit(f"the MCP server lists {names}")
    print(f"wheel smoke: add, recall and MCP tools ({', '.join(names)}) from {where.parent}")


if __name__ == "__main__":
    main()
