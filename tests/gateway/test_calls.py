"""Calls through the gateway against real MCP servers (the SDK's MCPServer over stdio and streamable HTTP, and a
hand-written noisy one), driven by the official SDK client inside the gateway: results, progress, cancellation,
and every failure of issue 34's item 5 ending in an error that names the server, with the gateway serving
throughout, one audit row per call, and no process left behind."""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
from pathlib import Path

import pytest

from a2x_local.db import connect
from a2x_local.gateway import AuditFilter, AuditLog, Gateway, GatewayConfig, GatewayError, query_audit
from a2x_local.gateway.policy import Caller, Profile
from tests.gateway.helpers import http_test_server, processes_with, stdio_server, tool, unique, wait_until_gone
from tests.support.registries import make_registry

ECHO = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
ADD = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}
ALLOWED = Caller(Profile("ops", call=("*",), deny=("*/never",)), "token:test")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """One gateway over six servers (their processes start on first use), its audit in a real registry."""
    folder = tmp_path_factory.mktemp("gateway")
    marker = unique("gw")
    names = {kind: f"{marker}-{kind}" for kind in ("t", "h", "noisy", "mute", "nostart", "stuck", "web")}
    with http_test_server(names["web"]) as url:
        path = folder / "gateway.toml"
        path.write_text(stdio_server(names["t"]) + stdio_server(names["h"], call_timeout_s=3)
                        + stdio_server(names["noisy"], "--garbage", "answer")
                        + stdio_server(names["mute"], "--garbage", "hang", call_timeout_s=3)
                        + stdio_server(names["nostart"], "--fail-start")
                        + stdio_server(names["stuck"], "--hang-start", start_timeout_s=3)
                        + f'[servers."{names["web"]}"]\nurl = "{url}"\n', encoding="utf-8")
        db = make_registry(folder / "registry.duckdb")
        config = GatewayConfig.defaults( max_result_bytes=100_000,
                                        max_argument_bytes=20_000, max_sessions_per_server=2,
                                        max_calls_per_session=8, audit_flush_s=0.2)
        gateway = Gateway(config, path, audit=AuditLog(db, config))
        t, h = names["t"], names["h"]
        services = {s.id: s for s in [tool(t, "echo", ECHO), tool(t, "add", ADD), tool(t, "count_steps"),
                                      tool(h, "hang"), tool(h, "hang_marked"), tool(h, "echo", ECHO),
                                      tool(t, "die"), tool(t, "big"),
                                      tool(t, "wait_ms"), tool(t, "broken"), tool(names["noisy"], "noisy"),
                                      tool(names["mute"], "noisy"), tool(names["nostart"], "echo", ECHO),
                                      tool(names["stuck"], "echo", ECHO), tool(names["web"], "echo", ECHO)]}
        try:
            yield {"gateway": gateway, "services": services, "names": names, "marker": marker, "db": db,
                   "folder": folder}
        finally:
            gateway.close()
    assert wait_until_gone(marker) == [], "a server process outlived the gateway"


def call(world, service_id, arguments, *, caller=ALLOWED, report=None, via="test"):
    async def go():
        return await world["gateway"].call(caller, service_id, world["services"].get(service_id), arguments,
                                           services=world["services"], via=via, report=report)

    return asyncio.run(go())


def refused(world, service_id, arguments, **kwargs) -> GatewayError:
    with pytest.raises(GatewayError) as caught:
        call(world, service_id, arguments, **kwargs)
    return caught.value


def audit_rows(world) -> list[dict]:
    world["gateway"].audit.flush()
    with connect(world["db"], mode="read") as con:
        return query_audit(con, AuditFilter())


def test_a_call_answers_and_progress_comes_back(world):
    t = world["names"]["t"]
    assert call(world, f"{t}/echo", {"text": "hello"}).content[0].text == f"{t}: hello"
    assert call(world, f"{t}/add", {"a": 2, "b": 40}).structured_content == {"result": 42}
    heard = []

    async def report(progress, total, message):
        heard.append((progress, total, message))

    answer = call(world, f"{t}/count_steps", {"steps": 3}, report=report)
    assert answer.content[0].text == "counted 3"
    time.sleep(0.2)       # the last notification crosses from the gateway's loop
    assert [h[0] for h in heard] == [1, 2, 3] and heard[-1][2] == "step 3 of 3"
    tool_error = call(world, f"{t}/broken", {})
    assert tool_error.is_error    # the tool's own error answer is passed through, not turned into a failure


def test_arguments_are_checked_before_anything_is_sent(world):
    t = world["names"]["t"]
    error = refused(world, f"{t}/add", {"a": "two"})
    assert error.code == "BadArguments" and f"server '{t}'" in error.message
    assert "arguments.a: 'two' is not of type 'integer'" in error.message and "'b' is a required property" in \
        error.message
    huge = refused(world, f"{t}/echo", {"text": "x" * 10_000_000})
    assert huge.code == "ArgumentsTooLarge" and huge.status == 413 and "10,000,0" in huge.message
    stuck = world["names"]["stuck"]
    assert refused(world, f"{stuck}/echo", {"text": 5}).code == "BadArguments"
    assert world["gateway"].pools.get(stuck) is None, "a refused call started the server"


def test_policy_refusals_and_a_service_gone_from_the_registry(world):
    t = world["names"]["t"]
    reader = Caller(Profile("reader"), "anonymous")
    denied = refused(world, f"{t}/echo", {"text": "x"}, caller=reader)
    assert denied.code == "NotCallable" and denied.status == 403 and "profile 'reader'" in denied.message
    gone = refused(world, f"{t}/removed", {})
    assert gone.code == "NoSuchService" and gone.status == 404


def test_a_hanging_server_times_out_and_the_cancellation_reaches_it(world, tmp_path):
    t = world["names"]["h"]
    started = time.monotonic()
    hung = refused(world, f"{t}/hang", {})
    assert hung.code == "ServerTimeout" and hung.status == 504 and f"server '{t}'" in hung.message
    assert time.monotonic() - started < 3 + 90
    # A caller that goes away cancels its call: the server hears notifications/cancelled.
    assert call(world, f"{t}/echo", {"text": "warm"}).content[0].text.endswith("warm")   # a session is ready
    marker = tmp_path / "cancelled.txt"

    async def cancel_midway():
        task = asyncio.ensure_future(world["gateway"].call(
            ALLOWED, f"{t}/hang_marked", world["services"][f"{t}/hang_marked"], {"path": str(marker)},
            services=world["services"], via="test"))
        await asyncio.sleep(1.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_midway())
    deadline = time.monotonic() + 10
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.read_text() == "cancelled"
    assert call(world, f"{t}/echo", {"text": "still here"}).content[0].text.endswith("still here")


def test_a_server_killed_mid_call_is_named_and_the_next_call_gets_a_new_one(world):
    t = world["names"]["t"]
    died = refused(world, f"{t}/die", {})
    assert died.code == "ServerFailed" and "connection closed during a call of tool 'die'" in died.message
    assert call(world, f"{t}/echo", {"text": "again"}).content[0].text.endswith("again")


def test_a_ten_megabyte_answer_is_refused_with_the_server_named(world):
    t = world["names"]["t"]
    large = refused(world, f"{t}/big", {"size": 10_000_000})
    size = re.search(rf"server '{t}' answered tool 'big' with ([\d,]+) bytes; the gateway passes at most 100,000",
                     large.message)
    assert large.code == "ResultTooLarge" and size and int(size.group(1).replace(",", "")) > 10_000_000
    assert call(world, f"{t}/big", {"size": 10}).content[0].text == "x" * 10


def test_lines_that_are_not_json_rpc_are_survived_or_named(world, caplog):
    noisy, mute = world["names"]["noisy"], world["names"]["mute"]
    assert call(world, f"{noisy}/noisy", {}).content[0].text == "answered amid noise"
    with caplog.at_level("WARNING", logger="a2x_local.gateway"):
        silent = refused(world, f"{mute}/noisy", {})
    assert silent.code == "ServerTimeout" and f"server '{mute}'" in silent.message
    assert "printed 2 line(s) on stdout that are not JSON-RPC" in silent.message
    assert "DEBUG" not in silent.message and "DEBUG: starting the call" in caplog.text   # the line: in the log


def test_servers_that_do_not_start_are_named_with_what_they_said(world, caplog):
    nostart, stuck = world["names"]["nostart"], world["names"]["stuck"]
    with caplog.at_level("WARNING", logger="a2x_local.gateway"):
        failed = refused(world, f"{nostart}/echo", {"text": "x"})
    assert failed.code == "ServerFailed" and f"server '{nostart}': did not start" in failed.message
    # What it said on stderr (which could hold its secrets) goes to the gateway's log, not to the client.
    assert "configuration is missing" not in failed.message and "the gateway's log has its stderr" in failed.message
    assert "cannot start: the configuration is missing" in caplog.text and sys.executable in caplog.text
    hung = refused(world, f"{stuck}/echo", {"text": "x"})
    assert hung.code == "ServerTimeout" and "did not answer the MCP handshake within 3 s" in hung.message
    assert processes_with(stuck) == [], "the server that hung at start was left running"


def test_a_hundred_concurrent_calls_to_one_stdio_server(world):
    t = world["names"]["t"]
    gateway = world["gateway"]

    async def many():
        return await asyncio.gather(*(gateway.call(ALLOWED, f"{t}/wait_ms", world["services"][f"{t}/wait_ms"],
                                                   {"ms": 50}, services=world["services"], via="test")
                                      for _ in range(100)), return_exceptions=True)

    outcomes = asyncio.run(many())
    answered = [o for o in outcomes if not isinstance(o, BaseException)]
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    assert all(isinstance(e, GatewayError) and f"server '{t}'" in e.message for e in errors), errors[:3]
    assert len(answered) == 100, [e.message for e in errors[:3]]
    assert all(o.content[0].text == "waited 50 ms" for o in answered)
    assert len(processes_with(t + " ")) + len(processes_with(t + "\x00")) <= 2   # at most max_sessions processes
    assert call(world, f"{t}/echo", {"text": "after the crowd"}).content[0].text.endswith("after the crowd")


def test_an_http_server_keeps_one_session_for_its_calls(world):
    web = world["names"]["web"]
    for number in range(3):
        assert call(world, f"{web}/echo", {"text": str(number)}).content[0].text == f"{web}: {number}"
    assert world["gateway"].pools[web].started == 1


def test_every_call_left_an_audit_row_with_no_argument_text(world):
    t = world["names"]["t"]
    call(world, f"{t}/echo", {"text": "a secret value"})
    rows = audit_rows(world)
    mine = [row for row in rows if row["service_id"] == f"{t}/echo" and row["outcome"] == "ok"]
    assert mine and mine[0]["arguments_preview"] == '{"text":"<string 14>"}'
    assert len(mine[0]["arguments_sha256"]) == 64 and mine[0]["arguments_text"] is None
    assert all("a secret value" not in json.dumps(row) for row in rows)
    outcomes = {row["outcome"] for row in rows}
    assert {"ok", "tool_error", "invalid", "too_large", "denied", "timeout", "failed", "cancelled"} <= outcomes
    assert all(row["profile"] in ("ops", "reader") for row in rows)
    timeout = next(row for row in rows if row["outcome"] == "timeout")
    assert timeout["error"].startswith("ServerTimeout: ") and timeout["server"]


def test_sessions_unused_for_the_idle_time_are_stopped(tmp_path):
    name = unique("idle")
    path = tmp_path / "gateway.toml"
    path.write_text(stdio_server(name), encoding="utf-8")
    config = GatewayConfig.defaults(idle_stop_s=1, start_timeout_s=30)
    gateway = Gateway(config, path)
    service = tool(name, "echo", ECHO)
    try:
        answer = asyncio.run(gateway.call(ALLOWED, service.id, service, {"text": "x"}, services={service.id: service},
                                          via="test"))
        assert answer.content[0].text == f"{name}: x" and processes_with(name)
        assert wait_until_gone(name, timeout_s=60) == []
        deadline = time.monotonic() + 30
        while gateway.live_sessions() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert gateway.live_sessions() == {}
    finally:
        gateway.close()


def test_audit_text_when_the_owner_turns_it_on_and_retention(tmp_path):
    db = make_registry(tmp_path / "registry.duckdb")
    config = GatewayConfig.defaults(audit_text=True, audit_text_chars=5, audit_retention_days=1)
    audit = AuditLog(db, config)
    path = tmp_path / "gateway.toml"
    path.write_text("", encoding="utf-8")
    gateway = Gateway(config, path, audit=audit)
    service = tool("nowhere", "echo", ECHO)
    with pytest.raises(GatewayError, match="server 'nowhere' is not in the gateway file"):
        asyncio.run(gateway.call(ALLOWED, service.id, service, {"text": "abcdefgh"}, services={}, via="test"))
    gateway.close()
    with connect(db) as con:
        rows = query_audit(con, AuditFilter(service="nowhere/*"))
        assert rows[0]["arguments_text"] == '{"tex' and rows[0]["outcome"] == "failed"
        con.execute("UPDATE gateway_calls SET called_at = called_at - INTERVAL 3 DAY")
    assert Path(db).is_file()
    from a2x_local.gateway import prune

    with connect(db) as con:
        assert prune(con, 1) == 1 and query_audit(con, AuditFilter()) == []


def test_rows_wait_in_the_spool_while_the_registry_is_busy_and_a_later_server_takes_them_over(tmp_path):
    import threading
    from datetime import UTC, datetime

    from a2x_local.gateway.audit import AuditRow, spools

    db = make_registry(tmp_path / "registry.duckdb")
    config = GatewayConfig.defaults(audit_flush_s=60)
    busy = threading.RLock()
    held, release = threading.Event(), threading.Event()

    def index_build():          # another thread of the server holds the registry, as an index build does
        with busy:
            held.set()
            release.wait(30)

    builder = threading.Thread(target=index_build)
    builder.start()
    held.wait(10)
    audit = AuditLog(db, config, database=busy)
    now = datetime.now(UTC).replace(tzinfo=None, microsecond=0)     # within the retention
    audit.record(AuditRow(called_at=now, profile="ops", client="stdio", via="test",
                          service_id="clock/now", server="clock", tool="now", arguments_sha256=None,
                          arguments_preview=None, arguments_bytes=None, duration_ms=1.0, outcome="ok"))
    assert audit.flush(wait_s=0.1) == 0 and audit.pending == 1
    with connect(db, mode="read") as con:
        shown = query_audit(con, AuditFilter(), db)
    assert [(row["id"], row["service_id"]) for row in shown] == [(None, "clock/now")]   # visible at once
    # The server stops before it could write: its spool stays, under a process id that is gone.
    (dead,) = spools(db)
    dead.rename(dead.with_name(f"{db.name}.audit-spool-4194303.jsonl"))
    release.set()
    builder.join()
    later = AuditLog(db, config)
    assert later.pending == 1 and later.flush() == 1
    with connect(db, mode="read") as con:
        rows = query_audit(con, AuditFilter(), db)
    assert [(row["service_id"], row["called_at"]) for row in rows] == [
        ("clock/now", now.isoformat(sep=" ", timespec="milliseconds") + "Z")]
    assert rows[0]["id"] is not None and spools(db) == []


def test_an_http_server_that_goes_away_is_named_and_its_session_dropped(tmp_path):
    name = unique("gone")
    path = tmp_path / "gateway.toml"
    service = tool(name, "echo", ECHO)
    with http_test_server(name) as url:
        path.write_text(f'[servers."{name}"]\nurl = "{url}"\ncall_timeout_s = 30\nstart_timeout_s = 60\n',
                        encoding="utf-8")
        gateway = Gateway(GatewayConfig.defaults(), path)

        def once():
            return asyncio.run(gateway.call(ALLOWED, service.id, service, {"text": "x"},
                                            services={service.id: service}, via="test"))

        assert once().content[0].text == f"{name}: x"
    try:
        for _ in range(2):      # the session that lost its server, then a new one that cannot connect
            with pytest.raises(GatewayError) as failed:
                once()
            assert failed.value.code == "ServerFailed" and f"server '{name}'" in failed.value.message
        assert gateway.pools[name].live() <= 1
    finally:
        gateway.close()


def test_the_wait_for_a_free_session_and_the_call_share_one_deadline(tmp_path):
    """[gateway] call_timeout_s includes the wait: a call queued behind a 2 s call on the one session of a server,
    then hanging, ends at its 3 s limit, not 2 s + 3 s later."""
    name = unique("deadline")
    path = tmp_path / "gateway.toml"
    path.write_text(stdio_server(name, call_timeout_s=3) + "max_sessions = 1\n", encoding="utf-8")
    gateway = Gateway(GatewayConfig.defaults(max_calls_per_session=1), path)
    services = {s.id: s for s in [tool(name, "echo", ECHO), tool(name, "wait_ms"), tool(name, "hang")]}

    def one(tool_name, arguments):
        return gateway.call(ALLOWED, f"{name}/{tool_name}", services[f"{name}/{tool_name}"], arguments,
                            services=services, via="test")

    async def queued():
        await one("echo", {"text": "warm"})          # the session is up: its start does not count
        first = asyncio.ensure_future(one("wait_ms", {"ms": 2000}))
        await asyncio.sleep(0.1)
        started = time.monotonic()
        try:
            await one("hang", {})
        except GatewayError as exc:
            return exc, time.monotonic() - started, await first
        raise AssertionError("a hanging tool answered")

    try:
        error, took, first = asyncio.run(queued())
    finally:
        gateway.close()
    assert first.content[0].text == "waited 2000 ms"
    assert error.code in ("ServerTimeout", "Busy") and f"server '{name}'" in error.message, error.message
    assert took < 3 + 1.3, f"the queued call took {took:.1f} s against a 3 s limit"
    if error.code == "ServerTimeout":
        assert "waiting for a free session" in error.message
    assert wait_until_gone(name) == []
