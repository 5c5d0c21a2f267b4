"""`serve --stdio` ends cleanly when its client closes the session (issue 33, item 11): exit status 0 and nothing on
stderr but the server's own log lines, also while its background loading is still inside native code (torch's
imports for the hybrid method's embedding model), where Python's shutdown used to abort the process ("terminate
called after throwing an instance of ''", "FATAL: exception not rethrown", status 134)."""

from __future__ import annotations

import asyncio
import shlex

import mcp.client.stdio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.serve.helpers import ROOT, cli_command, registry_with_trees, server_env


def test_a_closed_stdio_session_ends_the_server_with_status_0_and_a_clean_stderr(db_path, tmp_path, monkeypatch):
    registry_with_trees(db_path)
    home = tmp_path / "home"
    env = server_env(home, preload=["hybrid"])
    status = tmp_path / "status"
    # The SDK gives a server 2 s to exit before it kills it; on a loaded machine a clean exit may take longer.
    monkeypatch.setattr(mcp.client.stdio, "PROCESS_TERMINATION_TIMEOUT", 120.0)
    # A shell around the server keeps its exit status (the SDK does not report it).
    command = shlex.join(cli_command("serve", "--stdio", "--db", str(db_path)))
    params = StdioServerParameters(command="sh", args=["-c", f"{command}; echo $? > {shlex.quote(str(status))}"],
                                   env=env, cwd=str(ROOT))
    errlog = tmp_path / "stderr.txt"

    async def session() -> bool:
        with errlog.open("w", encoding="utf-8") as err:
            async with stdio_client(params, errlog=err) as (read, write), ClientSession(read, write) as client:
                await client.initialize()
                listed = await client.call_tool("list_services", {"limit": 2})
                return not listed.is_error

    assert asyncio.run(session())
    stderr = errlog.read_text(encoding="utf-8")
    assert status.read_text().strip() == "0", stderr[-3000:]
    for bad in ("terminate called", "FATAL", "Traceback", "Aborted"):
        assert bad not in stderr, stderr[-3000:]
    assert all(" INFO " in line or " WARNING " in line for line in stderr.splitlines() if line.strip()), stderr
