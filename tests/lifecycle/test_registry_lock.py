"""One registry write lock for every writer (issue 21, finding 4): while a job holds it (a nightly, in another
process), `ingest --sync`, `tree activate`, `services remove` and a build wait a bounded time and are refused with
exit code 1 and a message naming the holder; a nightly re-checks, before it activates, that the registry and the
active tree are still the ones it built for; a skipped nightly still writes its report."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from a2x_local.db import connect, transaction
from a2x_local.lifecycle.lock import NightlyLock
from a2x_local.locks import RegistryBusyError, RegistryLock
from a2x_local.registry import Registry
from a2x_local.taxonomy import activate, active_build_id
from a2x_local.testing import ScriptedEngine
from tests.lifecycle.world import BASE, World, service, services, write_world_config
from tests.support.paths import ROOT
from tests.support.processes import python_command, tree_env


@pytest.fixture
def night(home, use_engine):
    write_world_config(home, engine="scripted")
    with (home / "config.toml").open("a", encoding="utf-8") as config:
        config.write("[registry]\nlock_timeout_s = 0.5\n")
    use_engine("scripted", lambda config: ScriptedEngine(World()))


def write_export(path: Path, listed) -> Path:
    path.write_text(json.dumps([s.to_dict() for s in listed]), encoding="utf-8")
    return path


class Holder:
    """Another process that holds the registry write lock as a nightly job would, until it is stopped."""

    def __init__(self, db_path: Path) -> None:
        code = ("import sys, time\nfrom a2x_local.locks import RegistryLock\n"
                "with RegistryLock(sys.argv[1], 'nightly'):\n    print('held', flush=True)\n    time.sleep(120)\n")
        self.process = subprocess.Popen(python_command(code, str(db_path)), stdout=subprocess.PIPE, text=True,
                                        cwd=ROOT, env=tree_env())

    def __enter__(self) -> Holder:
        assert self.process.stdout is not None and self.process.stdout.readline().strip() == "held"
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.process.kill()
        self.process.wait(timeout=30)


def test_while_a_nightly_holds_the_registry_other_writers_are_refused(cli, night, tmp_path, db_path):
    export = write_export(tmp_path / "export.json", services(BASE, 1))
    assert cli("nightly", "--source", export, "--model", "scripted", "--report", tmp_path / "r1.json").code == 0
    before = cli("stats", "--json").json()
    smaller = write_export(tmp_path / "smaller.json", services(BASE, 1)[:5])
    with Holder(db_path) as holder:
        started = time.monotonic()
        synced = cli("ingest", "--sync", "--force", smaller)
        waited = time.monotonic() - started
        activated = cli("tree", "activate", "1", "--json")
        removed = cli("services", "remove", "weather-rain-0")
        built = cli("build", "--model", "scripted")
        assert cli("stats", "--json").code == 0         # readers are never kept out
        assert cli("ingest", "--sync", "--dry-run", smaller).code == 0   # nor a dry run, which writes nothing
    for result in (synced, activated, removed, built):
        assert result.code == 1, result.err
        assert "another a2x-local job is changing the registry" in result.err, result.err
        assert f"process {holder.process.pid}: nightly" in result.err and "hint:" in result.err
    assert json.loads(activated.out)["error"] == "RegistryBusy"
    assert 0.4 < waited < 20      # it waited (lock_timeout_s = 0.5), then gave up
    assert cli("stats", "--json").json() == before
    assert cli("ingest", "--sync", "--force", smaller).code == 0     # the lock is free again


def test_the_lock_is_reentrant_in_one_process_and_exclusive_across(tmp_path):
    db = tmp_path / "r.duckdb"
    with RegistryLock(db, "outer"), RegistryLock(db, "inner"):
        pass
    with Holder(db), pytest.raises(RegistryBusyError, match=r"process .*: nightly"):
        RegistryLock(db, "second", wait_s=0.2).acquire()
    with RegistryLock(db, "after"):
        pass


def _write_behind_the_lock(db_path: Path, change) -> None:
    """What a writer that does not take the lock (an older a2x-local, a hand edit) does."""
    with connect(db_path) as con, transaction(con):
        change(con)


@pytest.mark.parametrize("change", ["services", "rollback"])
def test_a_nightly_does_not_activate_when_the_registry_changed_under_it(cli, night, tmp_path, db_path, monkeypatch,
                                                                      change):
    export = write_export(tmp_path / "export.json", services(BASE, 1))
    assert cli("nightly", "--source", export, "--model", "scripted", "--report", tmp_path / "r1.json").code == 0
    assert cli("nightly", "--source", export, "--model", "scripted", "--rebuild",
               "--report", tmp_path / "r2.json").code == 0
    write_export(export, [*services(BASE, 1), service("weather", "hail", 0)])
    import a2x_local.lifecycle.nightly as nightly

    real_update = nightly.run_update

    def update_then_interfere(*args, **kwargs):
        outcome = real_update(*args, **kwargs)
        if change == "services":
            _write_behind_the_lock(db_path, lambda con: Registry(con).insert([service("music", "pop", 0)]))
        else:   # an operator rolls back to tree 1 while the job runs
            _write_behind_the_lock(db_path, lambda con: activate(con, 1))
        return outcome

    monkeypatch.setattr(nightly, "run_update", update_then_interfere)
    result = cli("nightly", "--source", export, "--model", "scripted", "--report", tmp_path / "r3.json", "--json")
    assert result.code == 1, result.err
    report = json.loads((tmp_path / "r3.json").read_text())
    assert report["status"] == "failed" and report["error"]["error"] == "RegistryChanged"
    assert "was kept but not activated" in report["error"]["message"]
    with connect(db_path, mode="read") as con:
        assert active_build_id(con) == (2 if change == "services" else 1)   # the rollback stands


def test_a_skipped_nightly_writes_its_report(cli, night, tmp_path, db_path):
    export = write_export(tmp_path / "export.json", services(BASE, 1))
    with NightlyLock(db_path):
        busy = cli("nightly", "--source", export, "--model", "scripted", "--report", tmp_path / "skip.json")
    assert busy.code == 4
    report = json.loads((tmp_path / "skip.json").read_text())
    assert report["status"] == "skipped" and report["exit_code"] == 4
    assert report["error"]["error"] == "NightlyBusyError"
    with Holder(db_path):
        held = cli("nightly", "--source", export, "--model", "scripted", "--report", tmp_path / "held.json")
    assert held.code == 4 and "changing the registry" in held.err
    assert json.loads((tmp_path / "held.json").read_text())["status"] == "skipped"
