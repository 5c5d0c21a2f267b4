"""Provenance: the project wheel carries its commit and bundle id (never written into the checkout), `--version`
shows it, and the registry keeps the history of the installs that created or upgraded it (`stats`)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import duckdb
import pytest

from a2x_local import provenance
from a2x_local.db import connect, migrations, software_history
from a2x_local.delivery.project import build_project_wheel
from tests.support.paths import ROOT


def test_a_source_tree_says_it_is_not_from_a_bundle(cli):
    result = cli("--version", db=False)
    assert result.code == 0
    assert result.out.strip() == f"a2x-local {provenance.__version__} (source tree, not from a bundle)"


def test_the_project_wheel_carries_its_build_info_and_the_checkout_stays_clean(tmp_path: Path):
    info = {"commit": "0123456789abcdef", "dirty": False, "bundle_id": "bundle-x", "target": "cpu",
            "built_at": "20260101T000000Z"}
    wheel = build_project_wheel(ROOT, tmp_path, info)
    with zipfile.ZipFile(wheel) as archive:
        assert json.loads(archive.read(f"a2x_local/{provenance.BUILD_INFO}")) == info
        assert "a2x_local/delivery/install.sh" in archive.namelist()
        assert "a2x_local/migrations/004_software_history.sql" in archive.namelist()
    assert not (ROOT / "a2x_local" / provenance.BUILD_INFO).exists()
    shown = provenance.Provenance("0.1.0", info["commit"], False, info["bundle_id"]).describe()
    assert shown == "a2x-local 0.1.0 (commit 0123456789, bundle bundle-x)"


def use(monkeypatch: pytest.MonkeyPatch, software: provenance.Provenance) -> None:
    monkeypatch.setattr(provenance, "current", lambda: software)


def test_history_records_each_new_install_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = tmp_path / "r.duckdb"
    first = provenance.Provenance("0.1.0", "a" * 40, False, "bundle-1")
    use(monkeypatch, first)
    with connect(path):
        pass
    with connect(path, mode="read"):
        pass
    use(monkeypatch, provenance.Provenance("0.2.0", "b" * 40, True, "bundle-2"))
    with connect(path) as con:
        history = software_history(con)
    latest = len(migrations())
    assert [(row["bundle_id"], row["schema_from"], row["schema_to"]) for row in history] == [
        ("bundle-1", 0, latest), ("bundle-2", latest, latest)]
    assert history[1]["software"] == "a2x-local 0.2.0 (commit bbbbbbbbbb+changes, bundle bundle-2)"


def test_an_older_registry_is_migrated_and_its_earlier_migrations_shown(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch, cli):
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))  # what an install before the history kept: migrations 1-3 only
    con.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
                " applied_at TIMESTAMP NOT NULL)")
    for version, name, sql in migrations()[:3]:
        con.execute(sql)
        con.execute("INSERT INTO schema_migrations VALUES (?, ?, now())", [version, name])
    con.close()
    use(monkeypatch, provenance.Provenance("0.1.0", "c" * 40, False, "bundle-new"))
    result = cli("stats", "--json", "--db", path, db=False)
    assert result.code == 0, result.err
    data = result.json()
    assert data["software"]["bundle_id"] == "bundle-new"
    history = data["software_history"]
    assert [row["software"] for row in history[:3]] == [None, None, None]
    assert "by an install that kept no history" in history[0]["note"]
    latest = len(migrations())
    assert (history[3]["bundle_id"], history[3]["schema_from"], history[3]["schema_to"]) == ("bundle-new", 3, latest)
    shown = cli("stats", "--db", path, db=False)
    assert f"bundle bundle-new): migrated schema 3 -> {latest}" in " ".join(shown.out.split()), shown.out
