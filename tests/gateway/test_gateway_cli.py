"""The commands: `gateway show` (the file, checked, connecting to nothing), `gateway check` (tools registered,
a server that fails named with what it said, the others registered anyway), `audit` (filters and refusals)."""

from __future__ import annotations

import json

from a2x_local.db import connect
from a2x_local.registry import Registry
from tests.gateway.helpers import stdio_server, unique, wait_until_gone


def test_show_and_check_register_tools_and_name_a_server_that_fails(cli, registry_db, tmp_path, home):
    good, bad = unique("good"), unique("bad")
    gateway = tmp_path / "gateway.toml"
    gateway.write_text(stdio_server(good) + stdio_server(bad, "--fail-start")
                       + '[profiles.ops]\ntokens = [{ sha256 = "' + "0" * 64 + '" }]\ncall = ["*"]\n',
                       encoding="utf-8")
    shown = cli("gateway", "show", "--gateway", gateway, "--json")
    assert shown.code == 0, shown.err
    listed = json.loads(shown.out)
    assert [s["server"] for s in listed["servers"]] == [good, bad] and listed["profiles"][0]["tokens"] == 1
    checked = cli("gateway", "check", "--gateway", gateway, "--json")
    assert checked.code == 1 and "error: 1 of 2 servers could not be checked" in checked.err
    report = {s["server"]: s for s in json.loads(checked.out)["servers"]}
    assert report[good]["ok"] and f"{good}/echo" in report[good]["added"]
    failed = report[bad]
    assert not failed["ok"] and "did not start" in failed["error"]
    assert "cannot start: the configuration is missing" in failed["error"]    # the owner sees its stderr
    with connect(registry_db, mode="read") as con:
        tool = Registry(con).get(f"{good}/add")
    assert tool.type == "mcp_tool" and tool.metadata["server"] == good and tool.metadata["inputSchema"]["required"]
    # Checked again: nothing changes; a tool the server no longer lists would be removed.
    again = cli("gateway", "check", "--gateway", gateway, "--server", good, "--json")
    assert again.code == 0 and json.loads(again.out)["servers"][0]["added"] == []
    assert wait_until_gone(good) == [] and wait_until_gone(bad) == []


def test_a_bad_gateway_file_is_one_error_line_with_a_hint(cli, registry_db, tmp_path):
    gateway = tmp_path / "gateway.toml"
    gateway.write_text('[servers.clock]\ncommand = "x"\nshell = true\n', encoding="utf-8")
    result = cli("gateway", "check", "--gateway", gateway)
    assert result.code == 1 and "Traceback" not in result.err
    assert f"error: {gateway}: servers.clock: field 'shell': is not a gateway file field" in result.err
    assert "hint:" in result.err
    missing = cli("gateway", "show")
    assert missing.code == 1 and "no gateway file" in missing.err and "--gateway FILE" in missing.err


def test_audit_filters_and_refuses_what_it_cannot_read(cli, registry_db):
    with connect(registry_db) as con:
        con.execute("INSERT INTO gateway_calls (called_at, profile, client, via, service_id, server, tool, "
                    "duration_ms, outcome, error) VALUES "
                    "(now() - INTERVAL 2 DAY, 'ops', 'stdio', 'tool', 'clock/now', 'clock', 'now', 3, 'ok', NULL), "
                    "(now() - INTERVAL 1 HOUR, 'ops', 'stdio', 'http', 'clock/set', 'clock', 'set', 1, 'denied', "
                    "'NotCallable: no'), "
                    "(now() - INTERVAL 1 HOUR, 'default', 'anonymous', 'http', 'notes/read', 'notes', 'read', 2, "
                    "'ok', NULL)")
    def rows(*flags):
        result = cli("audit", "--json", *flags)
        assert result.code == 0, result.err
        return [row["service_id"] for row in json.loads(result.out)]

    assert rows() == ["clock/set", "notes/read", "clock/now"] or rows() == ["notes/read", "clock/set", "clock/now"]
    assert set(rows("--since", "1d")) == {"clock/set", "notes/read"}
    assert rows("--service", "clock/*", "--outcome", "denied") == ["clock/set"]
    assert rows("--profile", "default") == ["notes/read"]
    bad = cli("audit", "--outcome", "weird")
    assert bad.code == 2 and "unknown outcome 'weird'" in bad.err
    since = cli("audit", "--since", "yesterday")
    assert since.code == 2 and "neither a duration" in since.err
