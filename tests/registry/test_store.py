"""The registry store: migrations, fingerprint, stats, settings, removal; and the registry CLI around it."""

from __future__ import annotations

import json

import duckdb

from a2x_local.db import connect, migrations, schema_version
from a2x_local.registry import Registry, Service
from tests.support.paths import SAMPLE


def test_migrations_are_numbered_recorded_and_applied_once(tmp_path) -> None:
    path = tmp_path / "m.duckdb"
    with connect(path) as con:
        assert schema_version(con) == len(migrations())
        names = [row[0] for row in con.execute("SELECT name FROM schema_migrations ORDER BY version").fetchall()]
        assert names == [name for _, name, _ in migrations()]
    with connect(path) as con:  # reopening applies nothing twice
        assert con.execute("SELECT count(*) FROM schema_migrations").fetchone()[0] == len(migrations())


def test_newer_schema_is_refused(tmp_path) -> None:
    path = tmp_path / "future.duckdb"
    with connect(path) as con:
        con.execute("INSERT INTO schema_migrations VALUES (999, 'from_the_future', now())")
    import pytest

    from a2x_local.errors import UserError
    with pytest.raises(UserError, match="newer than this a2x-local knows"), connect(path):
        pass


def test_fingerprint_follows_names_and_descriptions_only(tmp_path) -> None:
    with connect(tmp_path / "f.duckdb") as con:
        registry = Registry(con)
        empty = registry.fingerprint()
        registry.insert([Service("a", "generic", "A", "first", {"x": 1}), Service("b", "skill", "B", "second")])
        base = registry.fingerprint()
        assert base != empty
        registry.update([Service("a", "generic", "A", "first", {"x": 2})])
        assert registry.fingerprint() == base  # metadata is not part of what a model reads
        registry.update([Service("a", "generic", "A", "first, changed")])
        changed = registry.fingerprint()
        assert changed != base
        registry.remove(["b"])
        assert registry.fingerprint() not in (base, changed)


def test_stats_and_settings(tmp_path) -> None:
    with connect(tmp_path / "s.duckdb") as con:
        registry = Registry(con)
        registry.insert([Service("a", "generic", "A", "1234"), Service("b", "skill", "B", "12345678"),
                         Service("c", "skill", "C", "12")])
        stats = registry.stats()
        assert stats.services == 3
        assert stats.by_type == {"skill": 2, "generic": 1}
        assert stats.description_chars["min"] == 2 and stats.description_chars["max"] == 8
        assert stats.description_chars["p50"] == 4
        registry.set_setting("embedding_model", {"path": "/models/e5"})
        assert registry.get_setting("embedding_model") == {"path": "/models/e5"}
        assert registry.get_setting("missing", "default") == "default"


def test_services_cli_list_show_remove(cli, db_path) -> None:
    assert cli("ingest", SAMPLE).code == 0
    listed = cli("services", "list", "--type", "mcp_tool", "--limit", "0", "--json").json()
    assert len(listed) == 30 and all(s["type"] == "mcp_tool" for s in listed)
    assert [s["id"] for s in listed] == sorted(s["id"] for s in listed)
    first = listed[0]["id"]
    shown = cli("services", "show", first, "--json").json()
    assert shown["metadata"]["inputSchema"]["type"] == "object"
    table = cli("services", "list", "--limit", "5")
    assert table.code == 0 and "5 of" in table.out
    missing = cli("services", "remove", first, "no/such/service")
    assert missing.code == 1 and "no/such/service" in missing.err
    assert cli("services", "show", first).code == 0  # all or nothing: the existing one is still there
    assert cli("services", "remove", first, "--json").json() == {"removed": 1, "removed_ids": [first]}
    gone = cli("services", "show", first)
    assert gone.code == 1 and "no service with id" in gone.err


def test_db_from_global_flag_environment_and_home(tmp_path, monkeypatch, capsys) -> None:
    from a2x_local.cli import run

    monkeypatch.setenv("A2X_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("A2X_DB", raising=False)
    assert run(["ingest", str(SAMPLE / "toolret_tools.json")]) == 0
    assert (tmp_path / "home" / "registry.duckdb").exists()
    assert run(["--db", str(tmp_path / "global.duckdb"), "ingest", str(SAMPLE / "mcp_servers.json")]) == 0
    monkeypatch.setenv("A2X_DB", str(tmp_path / "env.duckdb"))
    assert run(["ingest", str(SAMPLE / "skills")]) == 0
    counts = {}
    for name in ("home/registry.duckdb", "global.duckdb", "env.duckdb"):
        con = duckdb.connect(str(tmp_path / name), read_only=True)
        counts[name] = con.execute("SELECT count(*) FROM services").fetchone()[0]
        con.close()
    tools = len(json.loads((SAMPLE / "toolret_tools.json").read_text()))
    servers = len(json.loads((SAMPLE / "mcp_servers.json").read_text())["servers"])
    skills = len(list((SAMPLE / "skills").rglob("SKILL.md")))
    assert counts == {"home/registry.duckdb": tools, "global.duckdb": servers, "env.duckdb": skills}


def test_stats_on_an_empty_registry_and_usage_errors(cli) -> None:
    empty = cli("stats")
    assert empty.code == 0 and "registry is empty" in empty.out
    assert cli("ingest", "--no-such-flag").code == 2
    assert cli("services", db=False).code == 2  # a group without a sub-command shows help, as a usage error
