"""`ingest --sync`: the registry equals the export afterwards, all or nothing, with removals capped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from a2x_local.db import connect
from a2x_local.errors import InputError
from a2x_local.registry import Registry, SyncRefusedError, sync
from tests.support.registries import snapshot


def entry(i: int, description: str | None = None) -> dict:
    return {"id": f"svc/{i}", "type": "generic", "name": f"Service {i}",
            "description": description or f"Does thing number {i}.", "metadata": {}}


def export(path: Path, entries: list[dict]) -> Path:
    path.write_text(json.dumps(entries), encoding="utf-8")
    return path


def test_sync_adds_updates_and_removes_so_the_registry_equals_the_export(db_path, tmp_path):
    with connect(db_path) as con:
        first = sync(con, [export(tmp_path / "v1.json", [entry(i) for i in range(10)])], max_remove_share=0.2)
        assert first.counts() == {"added": 10, "updated": 0, "removed": 0, "unchanged": 0}
        second_entries = [entry(i) for i in range(1, 10)] + [entry(10)]
        second_entries[0] = entry(1, "Does thing number one, better.")
        report = sync(con, [export(tmp_path / "v2.json", second_entries)], max_remove_share=0.2)
        assert report.added == ["svc/10"] and report.removed == ["svc/0"]
        assert [(c.id, c.fields) for c in report.updated] == [("svc/1", ["description"])]
        assert report.unchanged == 8 and report.before == 10 and report.changed
        registry = Registry(con)
        assert registry.ids() == {e["id"] for e in second_entries}
        assert registry.get("svc/1").description == "Does thing number one, better."
        run = con.execute("SELECT added, updated, removed, unchanged, sync, replace FROM ingest_runs WHERE id = ?",
                          [report.run_id]).fetchone()
    assert run == (1, 1, 1, 8, True, True)
    data = report.to_dict()
    assert {key: data[key] for key in ("added", "updated", "removed", "unchanged")} == \
        {"added": 1, "updated": 1, "removed": 1, "unchanged": 8}
    assert data["services_after"] == 10 and data["removed_ids"] == ["svc/0"]


def test_sync_of_the_same_export_changes_nothing(db_path, tmp_path):
    source = export(tmp_path / "v1.json", [entry(i) for i in range(5)])
    with connect(db_path) as con:
        sync(con, [source], max_remove_share=0.2)
        fingerprint = Registry(con).fingerprint()
        again = sync(con, [source], max_remove_share=0.2)
        assert not again.changed and again.unchanged == 5 and Registry(con).fingerprint() == fingerprint


def test_removing_more_than_the_allowed_share_is_refused_unless_forced(db_path, tmp_path):
    with connect(db_path) as con:
        sync(con, [export(tmp_path / "full.json", [entry(i) for i in range(10)])], max_remove_share=0.2)
    before = snapshot(db_path)
    truncated = export(tmp_path / "truncated.json", [entry(i) for i in range(7)])   # 3 of 10 gone: 30% > 20%
    with connect(db_path) as con, pytest.raises(SyncRefusedError) as refused:
        sync(con, [truncated], max_remove_share=0.2)
    assert refused.value.report.removed == ["svc/7", "svc/8", "svc/9"]
    assert "3 of 10" in refused.value.message and "--force" in refused.value.hint
    assert snapshot(db_path) == before
    with connect(db_path) as con:
        forced = sync(con, [truncated], max_remove_share=0.2, force=True)
        assert forced.forced and Registry(con).count() == 7
        # Exactly at the share is allowed: 1 of 7 is 14%.
        assert sync(con, [export(tmp_path / "six.json", [entry(i) for i in range(6)])],
                    max_remove_share=1 / 7).removed == ["svc/6"]


def test_a_bad_entry_in_the_export_changes_nothing(db_path, tmp_path):
    with connect(db_path) as con:
        sync(con, [export(tmp_path / "v1.json", [entry(i) for i in range(4)])], max_remove_share=0.5)
    before = snapshot(db_path)
    broken = [entry(i) for i in range(1, 4)] + [{"id": "svc/9", "name": "No description"}]
    with connect(db_path) as con, pytest.raises(InputError) as error:
        sync(con, [export(tmp_path / "v2.json", broken)], max_remove_share=0.5)
    assert "v2.json" in error.value.message
    assert snapshot(db_path) == before


def test_a_dry_run_reports_and_writes_nothing(db_path, tmp_path):
    with connect(db_path) as con:
        sync(con, [export(tmp_path / "v1.json", [entry(i) for i in range(4)])], max_remove_share=0.5)
    before = snapshot(db_path)
    with connect(db_path) as con:
        report = sync(con, [export(tmp_path / "v2.json", [entry(i) for i in range(1, 5)])], max_remove_share=0.5,
                      dry_run=True)
    assert report.added == ["svc/4"] and report.removed == ["svc/0"] and report.run_id is None
    assert snapshot(db_path) == before


def test_cli_sync_table_json_and_errors(cli, tmp_path):
    assert cli("ingest", export(tmp_path / "v1.json", [entry(i) for i in range(10)]), "--sync").code == 0
    result = cli("ingest", export(tmp_path / "v2.json", [entry(i) for i in range(1, 11)]), "--sync", "--json")
    assert result.code == 0, result.err
    data = result.json()
    assert {key: data[key] for key in ("added", "updated", "removed", "unchanged")} == \
        {"added": 1, "updated": 0, "removed": 1, "unchanged": 9}
    assert data["added_ids"] == ["svc/10"] and data["removed_ids"] == ["svc/0"] and data["updated_ids"] == []

    table = cli("ingest", export(tmp_path / "v3.json", [entry(i) for i in range(2, 11)]), "--sync")
    assert table.code == 0 and "removed" in table.out and "svc/1" in table.out and "now holds 9" in table.out

    refused = cli("ingest", export(tmp_path / "v4.json", [entry(2)]), "--sync", "--json")
    assert refused.code == 1 and "--force" in refused.err
    assert json.loads(refused.out)["error"] == "SyncRefused"
    assert cli("stats", "--json").json()["services"] == 9

    assert cli("ingest", tmp_path / "v4.json", "--sync", "--force").code == 0
    assert cli("stats", "--json").json()["services"] == 1
    assert cli("ingest", tmp_path / "v4.json", "--force").code == 2        # --force only means something with --sync


def test_sync_lists_ids_whole_in_a_narrow_terminal(cli, tmp_path, monkeypatch):
    from a2x_local.cli.output import console

    long_id = "svc/" + "a-long-service-name-" * 3
    assert cli("ingest", export(tmp_path / "v1.json", [entry(i) for i in range(10)]), "--sync").code == 0
    monkeypatch.setattr(console, "width", 40)
    added = {**entry(10), "id": long_id}
    result = cli("ingest", export(tmp_path / "v2.json", [entry(i) for i in range(10)] + [added]), "--sync")
    assert result.code == 0, result.err
    assert f"added: {long_id}" in result.out.splitlines(), result.out
