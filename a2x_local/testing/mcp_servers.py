"""Small MCP servers written with the SDK's MCPServer (FastMCP), for the gateway's tests and benchmark only.

Run as a program: `python -m a2x_local.testing.mcp_servers [--name N] [--port P] [--delay-ms D] [--fail-start]
[--hang-start]`: over stdio without --port, else streamable HTTP on 127.0.0.1:P (never another address). Its
tools echo, add, wait, report progress, and misbehave on request (hang, die mid-call, answer megabytes, print lines
that are not JSON-RPC on stdout), so every failure the gateway must survive can be provoked by a call.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time

from mcp.server.mcpserver import Context, MCPServer


def make_server(name: str, delay_ms: float = 0.0) -> MCPServer:
    server = MCPServer(name, instructions="A test server.", log_level="ERROR")

    @server.tool(description="Echo the text back, prefixed with the server's name.")
    def echo(text: str) -> str:
        return f"{name}: {text}"

    @server.tool(description="Add two integers.")
    def add(a: int, b: int) -> int:
        return a + b

    @server.tool(description="Wait the server's configured delay (the benchmark's 50 ms tool), then answer.")
    async def work(label: str = "") -> str:
        await asyncio.sleep(delay_ms / 1000)
        return f"done {label}"

    @server.tool(description="Sleep this many milliseconds, then answer.")
    async def wait_ms(ms: int) -> str:
        await asyncio.sleep(ms / 1000)
        return f"waited {ms} ms"

    @server.tool(description="Report progress in steps, then answer.")
    async def count_steps(steps: int, ctx: Context) -> str:
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps, f"step {step} of {steps}")
            await asyncio.sleep(0.02)
        return f"counted {steps}"

    @server.tool(description="Never answer.")
    async def hang() -> str:
        await asyncio.sleep(3600)
        return "never"

    @server.tool(description="Never answer; when the call is cancelled, write 'cancelled' into the file named.")
    async def hang_marked(path: str) -> str:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write("cancelled")
            raise
        return "never"

    @server.tool(description="Exit the server's process in the middle of the call.")
    def die() -> str:
        os._exit(3)

    @server.tool(description="Answer a text of this many bytes.")
    def big(size: int) -> str:
        return "x" * size

    @server.tool(description="Fail as a tool: an error result, not a protocol error.")
    def broken() -> str:
        raise ValueError("the tool failed on purpose")

    return server


def garbage_server(hang: bool) -> None:
    """A stdio server written by hand, as servers outside the SDK are, that prints lines which are not JSON-RPC on
    its stdout around the answers of `tools/call` (or, with ``hang``, instead of them). The SDK's own stdio server
    keeps print() off the protocol channel, so this one writes the protocol itself."""
    import json

    out = sys.stdout
    for line in sys.stdin:
        message = json.loads(line)
        method, ident = message.get("method"), message.get("id")
        if ident is None:
            continue
        if method == "initialize":
            result = {"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
                      "serverInfo": {"name": "noisy", "version": "1"}}
        elif method == "tools/list":
            result = {"tools": [{"name": "noisy", "description": "Answers amid noise.",
                                 "inputSchema": {"type": "object", "properties": {}}}]}
        elif method == "tools/call":
            out.write("DEBUG: starting the call\n{not json either\n")
            out.flush()
            if hang:
                continue
            result = {"content": [{"type": "text", "text": "answered amid noise"}], "isError": False}
        else:
            result = {}
        out.write(json.dumps({"jsonrpc": "2.0", "id": ident, "result": result}) + "\n")
        out.flush()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--name", default="test")
    parser.add_argument("--port", type=int)
    parser.add_argument("--delay-ms", type=float, default=50.0)
    parser.add_argument("--fail-start", action="store_true", help="exit 2 with a message on stderr")
    parser.add_argument("--hang-start", action="store_true", help="never answer the handshake")
    parser.add_argument("--garbage", choices=["answer", "hang"], help="the hand-written noisy server instead")
    args = parser.parse_args(argv)
    if args.garbage:
        garbage_server(args.garbage == "hang")
        return
    if args.fail_start:
        print(f"{args.name}: cannot start: the configuration is missing", file=sys.stderr)
        raise SystemExit(2)
    if args.hang_start:
        time.sleep(3600)
    server = make_server(args.name, args.delay_ms)
    if args.port is None:
        server.run("stdio")
    else:
        import uvicorn

        app = server.streamable_http_app(stateless_http=False, json_response=True)
        # info: uvicorn's start line names the port, which a caller that passed --port 0 reads back.
        uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="info", access_log=False)


if __name__ == "__main__":
    main()
