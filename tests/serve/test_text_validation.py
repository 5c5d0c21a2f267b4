"""One text validation for queries and service text (issue 21, finding 7): a lone surrogate is a 400 naming the
field, never a 502 with a TypeError; one bad query in a batch is one error in its slot; over MCP stdio every line
gets an answer as JSON-RPC asks (a parse error for garbage), and the session goes on."""

from __future__ import annotations

import json
import select
import subprocess
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from a2x_local.errors import UserError
from a2x_local.search import check_queries
from a2x_local.serve.http_api import create_app
from a2x_local.serve.stdio import refusal
from a2x_local.text import check_text, one_line, quoted, text_problem
from tests.serve.helpers import ROOT, cli_command, make_server, registry_with_trees, server_env

LOOPBACK = "http://127.0.0.1"
JSON = {"content-type": "application/json"}


@pytest.fixture
def client(db_path):
    registry_with_trees(db_path)
    server = make_server(db_path)
    with TestClient(create_app(server.discovery, mcp=server.mcp), base_url=LOOPBACK,
                    raise_server_exceptions=False) as client:
        yield client
    server.close()


def test_a_lone_surrogate_is_a_400_naming_the_field(client):
    search = client.post("/v1/search", content='{"query": "\\ud800 hotel"}', headers=JSON)
    assert search.status_code == 400, search.text
    assert search.json()["error"] == "BadText" and search.json()["message"].startswith("query: contains an unpaired")
    compose = client.post("/v1/compose", content='{"request": "book \\udfff then pay"}', headers=JSON)
    assert compose.status_code == 400 and compose.json()["message"].startswith("request: contains an unpaired")


def test_one_bad_query_in_a_batch_is_one_error_in_its_slot(client):
    body = '{"requests": [{"query": "the h1 thing"}, {"query": "\\ud800"}, {"query": "the s2 thing", "k": 0}]}'
    answer = client.post("/v1/search/batch", content=body, headers=JSON)
    assert answer.status_code == 200, answer.text
    good, bad, bad_k = answer.json()["results"]
    assert good["hits"][0]["service_id"] == "h1" and "error" not in good   # lean answers leave out empty fields
    assert bad["hits"] == [] and bad["error"].startswith("requests[1]: query: contains an unpaired surrogate")
    assert bad["query"] == "\ufffd"
    assert bad_k["hits"] == [] and bad_k["error"].startswith("requests[2]: k must be between")


def test_every_search_path_passes_the_same_validation(cli, registry_db):
    with pytest.raises(UserError, match=r"the query \(query 2 of 2\): contains an unpaired surrogate U\+D800"):
        check_queries(["fine", "\ud800"])
    with pytest.raises(UserError, match="field: contains the control character U\\+001B"):
        check_text("\x1b[2J", "field", controls=True)
    check_text("\x1b[2J is data in a query", "query")
    assert text_problem("two\nlines\tok", multiline=True) is None
    # A command-line argument with bytes that are not UTF-8 arrives as lone surrogates (\udcff).
    result = cli("search", "hotel \udcff", "-m", "bm25")
    assert result.code == 1 and "contains an unpaired surrogate U+DCFF" in result.err and "Traceback" not in result.err


@pytest.mark.parametrize(("line", "answer"), [
    ("this is not json", {"id": None, "code": -32700}),
    ('{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "x", "arguments": {"q": "\\ud800"}}}',
     {"id": 7, "code": -32602, "where": "params.arguments.q"}),
    ('{"jsonrpc": "2.0", "id": "a", "result": 5, "error": 6}', {"id": "a", "code": -32600}),
    ('[1, 2', {"id": None, "code": -32700}),
    # issue 32, fourth round: an integer of 5,000 digits was a ValueError out of the loop, not a parse error
    ('{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"n": ' + "9" * 5000 + "}}",
     {"id": None, "code": -32700}),
])
def test_lines_the_sdk_would_drop_are_answered(line, answer):
    found = refusal(line)
    assert found is not None and found["id"] == answer["id"] and found["error"]["code"] == answer["code"]
    assert answer.get("where", "") in found["error"]["message"]


def test_lines_the_sdk_takes_and_bad_notifications_get_no_answer_here():
    assert refusal('{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}') is None
    assert refusal('{"jsonrpc": "2.0", "method": "notifications/x", "params": {"a": "\\ud800"}}') == {}


class StdioServer:
    """`a2x-local serve --stdio` spoken to line by line; every read is bounded, so a hang fails the test."""

    def __init__(self, db_path: Path, home: Path) -> None:
        self.process = subprocess.Popen(cli_command("serve", "--stdio", "--db", str(db_path)), cwd=ROOT,
                                        env=server_env(home), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL)

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode("utf-8", "surrogatepass") + b"\n")
        self.process.stdin.flush()

    def answer(self, timeout: float) -> dict:
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        assert ready, "no answer: the client would wait forever"
        return json.loads(self.process.stdout.readline())

    def close(self) -> None:
        self.process.kill()
        self.process.wait(timeout=30)


def test_over_stdio_every_bad_line_is_answered_and_the_session_goes_on(db_path, tmp_path):
    registry_with_trees(db_path)
    server = StdioServer(db_path, tmp_path / "home")
    try:
        server.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}))
        assert server.answer(180)["id"] == 1
        server.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        server.send("garbage {")
        parse = server.answer(30)
        assert parse["id"] is None and parse["error"]["code"] == -32700
        server.send('{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "search_services",'
                    ' "arguments": {"query": "\\ud800 hotel"}}}')
        refused = server.answer(30)
        assert refused["id"] == 2 and refused["error"]["code"] == -32602
        assert "params.arguments.query" in refused["error"]["message"]
        server.send(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "search_services", "arguments": {"query": "the h1 thing"}}}))
        found = server.answer(120)
        assert found["id"] == 3 and "h1" in json.dumps(found["result"])
    finally:
        server.close()


# ---- one way to show a name: one_line and quoted ------------------------------------------------------------------
def test_one_line_escapes_every_control_character() -> None:
    assert one_line("a\nb\tc\rd\x1b[2J\x07\x9b") == "a\\nb\\tc\\rd\\x1b[2J\\x07\\x9b"
    assert one_line("plain ünïcode") == "plain ünïcode"


def test_one_line_keeping_breaks_still_escapes_a_carriage_return() -> None:
    # A carriage return overwrites what its line showed ("safe\rEVIL" shows "EVIL"): escaped even in text that keeps
    # its line breaks.
    assert one_line("a\nb\tc\rd\x1b", keep_breaks=True) == "a\nb\tc\\rd\\x1b"


def test_quoted_escapes_what_does_not_print_and_the_bytes_that_are_not_utf8() -> None:
    assert quoted("model") == "'model'"
    assert quoted("a\u202eb\u200bc\n") == "'a\\u202eb\\u200bc\\n'"
    assert quoted("it's a\\b") == "'it\\'s a\\\\b'"
    assert quoted(b"caf\xff".decode("utf-8", "surrogateescape")) == "'caf\\xff'"
