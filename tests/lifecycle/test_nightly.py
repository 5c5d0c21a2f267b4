"""`a2x-local nightly` against an export that changes from night to night (scripted world model): what is active,
what was kept, what the report says and the exit code."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from a2x_local.db import connect
from a2x_local.errors import UserError
from a2x_local.lifecycle.lock import NightlyLock
from a2x_local.lifecycle.retention import apply_retention
from a2x_local.taxonomy import list_builds
from a2x_local.testing import ScriptedEngine
from tests.lifecycle.world import BASE, World, service, services, write_world_config
from tests.support.registries import make_registry


class Confused(World):
    """A bad model day: every service is filed under the category after its own."""

    def _assign(self, request, context):
        good = super()._assign(request, context).splitlines()
        count = len(context["categories"])
        shifted = []
        for line in good:
            number, answer = line.split(": ")
            if answer != "NONE":
                answer = ",".join(str(int(p) % count + 1) for p in answer.split(","))
            shifted.append(f"{number}: {answer}")
        return "\n".join(shifted)


SYNC_COUNTS = ("added", "updated", "removed", "unchanged")   # the sync report's counts, each under its name


def write_export(path: Path, listed) -> Path:
    path.write_text(json.dumps([s.to_dict() for s in listed]), encoding="utf-8")
    return path


def write_queries(path: Path) -> Path:
    queries = [{"id": "q1", "query": "weather rain", "correct_tools": [{"id": "weather-rain-0"}]},
               {"id": "q2", "query": "music jazz", "correct_tools": [{"id": "music-jazz-1"}]},
               {"id": "q3", "query": "weather hail", "correct_tools": [{"id": "weather-hail-0"}]}]
    path.write_text(json.dumps(queries), encoding="utf-8")
    return path


@pytest.fixture
def night(home, use_engine):
    """The scripted model, the configured engine (``night.rule`` can be swapped between runs)."""
    write_world_config(home, engine="scripted")

    class Night:
        rule = World()
        loads = 0

    def factory(config):
        Night.loads += 1
        return ScriptedEngine(Night.rule)

    use_engine("scripted", factory)
    return Night


def test_the_nightly_job_twice_against_a_changing_export(cli, night, tmp_path, db_path):
    export = tmp_path / "export.json"
    queries = write_queries(tmp_path / "queries.json")
    report = tmp_path / "reports" / "night.json"

    # Night 1: an empty registry and no tree: sync everything, build, nothing to gate against, activate.
    write_export(export, services(BASE, 3))
    first = cli("nightly", "--source", export, "--model", "scripted", "-q", queries, "--keep", "2",
                "--report", report, "--json")
    assert first.code == 0, first.err
    one = first.json()
    assert one["status"] == "activated" and one["action"] == "build" and one["reason"] == "no active tree"
    assert {key: one["sync"][key] for key in SYNC_COUNTS} == {"added": 18, "updated": 0, "removed": 0, "unchanged": 0}
    assert one["candidate"] == 1 and one["active_before"] is None and one["active_after"] == 1
    assert one["gate"] == {"skipped": "no active tree to compare with"}
    assert json.loads(report.read_text()) == {k: v for k, v in one.items() if k != "report_file"}

    # Night 2: two services appear, one disappears: placed into a new version, gated, activated.
    write_export(export, [s for s in services(BASE, 3) if s.id != "travel-hotel-2"]
                 + [service("weather", "hail", i) for i in range(2)])
    second = cli("nightly", "--source", export, "--model", "scripted", "-q", queries, "--keep", "2",
                 "--report", report, "--json")
    assert second.code == 0, second.err
    two = second.json()
    assert {key: two["sync"][key] for key in SYNC_COUNTS} == {"added": 2, "updated": 0, "removed": 1, "unchanged": 17}
    assert two["sync"]["removed_ids"] == ["travel-hotel-2"]
    assert two["action"] == "update" and two["status"] == "activated" and two["candidate"] == 2
    assert two["update"]["changes"]["removed"] == ["travel-hotel-2"]
    assert {p["service"]: p["nodes"] for p in two["update"]["placed"]} == {"weather-hail-0": ["root/3"],
                                                                            "weather-hail-1": ["root/3"]}
    gate = two["gate"]
    assert gate["passed"] and gate["candidate"] == 2 and gate["active"] == 1 and gate["queries"] == 3
    assert gate["candidate_hit"] == 100.0 and gate["active_hit"] == pytest.approx(200 / 3, abs=0.01)
    assert Path(gate["runs"]["candidate"], "summary.json").is_file()
    assert two["active_before"] == 1 and two["active_after"] == 2
    assert two["retention"]["kept"] == [1, 2] and two["retention"]["deleted"] == []
    assert two["usage"]["by_call_type"]["descend"]["calls"] > 0

    trees = {t["id"]: t for t in cli("tree", "list", "--json").json()}
    assert trees[2]["kind"] == "update" and trees[2]["parent_id"] == 1 and trees[2]["active"]


def test_a_quiet_night_loads_no_model_and_a_bad_one_is_refused_by_the_gate(cli, night, tmp_path, db_path):
    export = write_export(tmp_path / "export.json", services(BASE, 3))
    queries = write_queries(tmp_path / "queries.json")
    args = ("--source", export, "--model", "scripted", "-q", queries, "--keep", "2")
    assert cli("nightly", *args, "--report", tmp_path / "r1.json").code == 0
    loads = night.loads

    quiet = cli("nightly", *args, "--report", tmp_path / "r2.json", "--json")
    assert quiet.code == 0 and quiet.json()["status"] == "no_change" and quiet.json()["action"] == "none"
    assert night.loads == loads                                          # no model was started

    write_export(export, [*services(BASE, 3), service("weather", "hail", 0)])
    assert cli("nightly", *args, "--report", tmp_path / "r3.json").code == 0

    # A bad model day, a full rebuild (fresh answers): its tree files services under the wrong categories.
    night.rule = Confused()
    write_export(export, services(BASE, 3) + [service("weather", "hail", i) for i in range(2)])
    bad = cli("nightly", *args, "--rebuild", "--no-cache", "--report", tmp_path / "r4.json")
    assert bad.code == 3, bad.err
    assert "refused" in bad.out and "r4.json" in bad.out
    report = json.loads((tmp_path / "r4.json").read_text())
    assert report["status"] == "gate_refused" and report["exit_code"] == 3
    assert report["candidate"] == 3 and report["active_before"] == 2 and report["active_after"] == 2
    assert report["gate"]["drop"] > report["gate"]["max_drop"] == 2.0
    # Kept: the two newest (the refused one, for inspection, and the active one); the first tree is gone.
    assert report["retention"]["kept"] == [2, 3] and report["retention"]["deleted"] == [1]
    trees = cli("tree", "list", "--json").json()
    assert [(t["id"], t["active"]) for t in trees] == [(2, True), (3, False)]


def test_a_truncated_export_fails_the_night_and_changes_nothing(cli, night, tmp_path, db_path):
    export = write_export(tmp_path / "export.json", services(BASE, 3))
    assert cli("nightly", "--source", export, "--model", "scripted", "--report", tmp_path / "r1.json").code == 0
    write_export(export, services({"weather": ["rain"]}, 3))
    failed = cli("nightly", "--source", export, "--model", "scripted", "--report", tmp_path / "r2.json", "--json")
    assert failed.code == 1 and "--force" in failed.err
    report = failed.json()
    assert report["status"] == "failed" and report["error"]["error"] == "SyncRefused" and report["exit_code"] == 1
    assert report["active_before"] == report["active_after"] == 1      # what was serving, and still is
    assert json.loads((tmp_path / "r2.json").read_text())["status"] == "failed"
    assert cli("stats", "--json").json()["services"] == 18
    assert cli("tree", "list", "--json").json()[0]["active"]


def test_a_second_job_on_the_same_database_is_skipped_with_exit_code_4(cli, night, tmp_path, db_path):
    export = write_export(tmp_path / "export.json", services(BASE, 1))
    with NightlyLock(db_path):
        busy = cli("nightly", "--source", export, "--model", "scripted", "--json")
    assert busy.code == 4 and "another nightly job" in busy.err
    assert json.loads(busy.out)["error"] == "NightlyBusyError"


def test_the_nightly_build_waits_for_checkpoints_as_configured(cli, night, home, tmp_path, monkeypatch):
    config = home / "config.toml"
    config.write_text(config.read_text(encoding="utf-8") + "[registry]\ncheckpoint_wait_s = 7\n", encoding="utf-8")
    waits: list[float | None] = []

    def opening(path, **kwargs):    # each time the build opens the registry: how long it would wait for it
        waits.append(kwargs.get("lock_timeout_s"))
        if kwargs.get("lock_timeout_s") == 7:      # the first round's checkpoint: enough seen
            raise UserError("stop here")
        return connect(path, **kwargs)

    monkeypatch.setattr("a2x_local.taxonomy.induction.runner.connect", opening)
    export = write_export(tmp_path / "export.json", services(BASE, 1))
    result = cli("nightly", "--source", export, "--model", "scripted", "--report", tmp_path / "r.json")
    assert result.code == 1 and "could not be saved" in result.err and "stop here" in result.err, result.err
    assert waits[-1] == 7 and 7 not in waits[:-1]         # the checkpoint's wait; the start's is lock_timeout_s


def fail_builds(monkeypatch, error: UserError) -> None:
    """Every build of the job fails with ``error``, as a model server that went away would."""
    def build(*args, **kwargs):
        raise error

    monkeypatch.setattr("a2x_local.lifecycle.nightly.run_build", build)


def test_a_failed_night_prints_its_error_terminal_safe(cli, night, tmp_path, monkeypatch):
    fail_builds(monkeypatch, UserError("category \x1b[2Jweather", hint="rename \x07it"))
    export = write_export(tmp_path / "export.json", services(BASE, 1))
    result = cli("nightly", "--source", export, "--model", "scripted", "--report", tmp_path / "r.json")
    assert result.code == 1 and "\x1b" not in result.err and "\x07" not in result.err
    assert "error: category \\x1b[2Jweather" in result.err and "hint: rename \\x07it" in result.err


def test_a_failed_build_reports_the_tree_that_stays_active(cli, night, tmp_path, monkeypatch):
    export = write_export(tmp_path / "export.json", services(BASE, 1))
    assert cli("nightly", "--source", export, "--model", "scripted", "--report", tmp_path / "r1.json").code == 0
    fail_builds(monkeypatch, UserError("the model server went away", hint="start it again"))
    failed = cli("nightly", "--source", export, "--model", "scripted", "--rebuild", "--report", tmp_path / "r2.json")
    assert failed.code == 1 and "the model server went away" in failed.err
    assert re.search(r"active tree\s+│\s+1 → 1\s", failed.out), failed.out
    report = json.loads((tmp_path / "r2.json").read_text())
    assert report["status"] == "failed" and report["active_before"] == report["active_after"] == 1


def test_a_night_without_any_tree_says_none(cli, night, tmp_path, monkeypatch):
    fail_builds(monkeypatch, UserError("no model today", hint="install one"))
    export = write_export(tmp_path / "export.json", services(BASE, 1))
    failed = cli("nightly", "--source", export, "--model", "scripted", "--report", tmp_path / "r.json")
    assert failed.code == 1
    assert re.search(r"active tree\s+│\s+none → none\s", failed.out), failed.out


def test_retention_keeps_the_newest_and_never_the_active_one(db_path):
    make_registry(db_path, services(BASE, 1))
    from a2x_local.taxonomy import Tree, TreeNode, save_import

    with connect(db_path) as con:
        ids = []
        for k in range(4):
            root = TreeNode("root", None, 0, "All", "Everything.", services=["weather-rain-0"])
            ids.append(save_import(con, Tree({"root": root}), fingerprint="fp", source=f"t{k}",
                                   activate=k == 0, warnings=[]))
        result = apply_retention(con, 2)
        remaining = [r.id for r in list_builds(con)]
    assert result["deleted"] == [ids[1]] and result["active"] == ids[0]
    assert remaining == [ids[0], ids[2], ids[3]]
    with connect(db_path) as con, pytest.raises(ValueError):
        apply_retention(con, 0)


def test_retention_counts_only_completed_trees_and_keeps_failures_newer_than_them(db_path):
    make_registry(db_path, services(BASE, 1))
    from a2x_local.taxonomy import Tree, TreeNode, save_import
    from a2x_local.taxonomy.store import create_build

    def completed(con, k):
        root = TreeNode("root", None, 0, "All", "Everything.", services=["weather-rain-0"])
        return save_import(con, Tree({"root": root}), fingerprint="fp", source=f"t{k}", activate=k == 0, warnings=[])

    def unfinished(con, status):
        return create_build(con, kind="build", registry_fingerprint="fp", service_count=1, status=status)

    with connect(db_path) as con:
        active = completed(con, 0)
        old_failed, old_killed = unfinished(con, "failed"), unfinished(con, "running")   # no lock: interrupted
        rollback = [completed(con, 1), completed(con, 2)]
        recent = [unfinished(con, "failed"), unfinished(con, "interrupted"), unfinished(con, "failed")]
        result = apply_retention(con, 2)
        remaining = [r.id for r in list_builds(con)]
    # Three failed nights since the last completed tree push out neither tree kept for rollback.
    assert result["deleted"] == [old_failed, old_killed]
    assert remaining == result["kept"] == [active, *rollback, *recent]

