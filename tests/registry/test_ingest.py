"""Ingest behaviour: all-or-nothing, idempotent, conflicts, and bad input that names file, entry and field."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.paths import DATA, SAMPLE
from tests.support.paths import REGISTRY_FIXTURES as FIXTURES
from tests.support.registries import snapshot


def write_json(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def assert_nothing_stored(db_path: Path) -> None:
    assert snapshot(db_path) in ((), ([], []))


def good_entries() -> list[dict]:
    return [
        {"id": "svc/a", "type": "generic", "name": "Alpha", "description": "Does alpha things.", "metadata": {}},
        {"id": "svc/b", "type": "generic", "name": "Beta", "description": "Does beta things.", "metadata": {"k": 1}},
    ]


def test_all_shared_registries_in_one_database(cli) -> None:
    result = cli("ingest", DATA / "toolret" / "services.json", DATA / "publicmcp" / "services.json",
                 DATA / "a2a" / "agents.json", DATA / "skills", "--json")
    assert result.code == 0, result.err
    report = result.json()
    skill_count = len(list((DATA / "skills").rglob("SKILL.md")))
    assert [f["services"] for f in report["files"]] == [1839, 1387, 21, skill_count]
    assert report["services_after"] == 1839 + 1387 + 21 + skill_count and report["services_before"] == 0
    stats = cli("stats", "--json").json()
    assert stats["services"] == report["services_after"]
    assert stats["by_type"] == {"generic": 1839 + 1387, "a2a": 21, "skill": skill_count}


def test_reingesting_identical_content_is_a_no_op(cli, db_path: Path) -> None:
    assert cli("ingest", SAMPLE).code == 0
    before = cli("stats", "--json").json()
    again = cli("ingest", SAMPLE, "--json")
    assert again.code == 0
    report = again.json()
    assert report["added"] == 0 and report["updated"] == 0 and report["unchanged"] == before["services"]
    assert cli("stats", "--json").json()["fingerprint"] == before["fingerprint"]


def test_changed_entry_is_a_conflict_without_replace_and_an_update_with_it(cli, db_path: Path, tmp_path: Path):
    entries = good_entries()
    first = write_json(tmp_path / "v1.json", entries)
    assert cli("ingest", first).code == 0
    entries[1]["description"] = "Does beta things, better."
    entries.append({"id": "svc/c", "name": "Gamma", "description": "New one."})
    second = write_json(tmp_path / "v2.json", entries)
    before = snapshot(db_path)
    conflict = cli("ingest", second)
    assert conflict.code == 1
    assert "svc/b" in conflict.err and "--replace" in conflict.err and "nothing was ingested" in conflict.err
    assert "description" in conflict.out
    assert snapshot(db_path) == before  # the new svc/c was not written either
    replaced = cli("ingest", second, "--replace", "--json")
    assert replaced.code == 0
    report = replaced.json()
    assert report["added"] == 1 and report["added_ids"] == ["svc/c"]
    assert report["updated"] == 1 and report["updated_ids"] == ["svc/b"]
    assert report["updated_fields"] == {"svc/b": ["description"]}
    shown = cli("services", "show", "svc/b", "--json").json()
    assert shown["description"] == "Does beta things, better."


def test_duplicate_ids_inside_one_input_are_an_error(cli, db_path: Path, tmp_path: Path) -> None:
    entries = [*good_entries(), dict(good_entries()[0], name="Other")]
    result = cli("ingest", write_json(tmp_path / "dup.json", entries))
    assert result.code == 1
    assert "dup.json" in result.err and "'svc/a'" in result.err and "duplicate id" in result.err
    across = cli("ingest", write_json(tmp_path / "one.json", good_entries()[:1]),
                 write_json(tmp_path / "two.json", good_entries()[:1]))
    assert across.code == 1 and "two.json" in across.err and "first seen in" in across.err
    assert_nothing_stored(db_path)


BAD_INPUTS = {
    "malformed_json": ('[{"id": "x", "name": "X", "description": "d"},', "malformed JSON", None, None),
    "missing_name": ([{"id": "x", "description": "d"}], "is missing", "0 (id 'x')", "name"),
    "missing_description": ([{"id": "x", "name": "X"}], "is missing", "0 (id 'x')", "description"),
    "blank_description": ([{"id": "x", "name": "X", "description": "   "}], "is empty", "0 (id 'x')", "description"),
    "id_wrong_type": ([{"id": 7, "name": "X", "description": "d"}], "must be a string, got number", "entry 0", "id"),
    "metadata_wrong_type": ([{"id": "x", "name": "X", "description": "d", "metadata": "m"}],
                            "must be an object, got string", "0 (id 'x')", "metadata"),
    "unknown_type": ([{"id": "x", "type": "robot", "name": "X", "description": "d"}], "unknown service type",
                     "0 (id 'x')", "type"),
    "entry_not_object": ([["x"]], "must be an object, got array", "entry 0", None),
    "second_entry_bad": ([*good_entries(), {"id": "z", "name": 3, "description": "d"}], "must be a string",
                         "2 (id 'z')", "name"),
    "empty_file": ("", "file is empty", None, None),
    "empty_list": ([], "contains no services", None, None),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_json_input_is_reported_and_changes_nothing(case: str, cli, db_path: Path, tmp_path: Path) -> None:
    assert cli("ingest", SAMPLE / "toolret_tools.json").code == 0
    before = snapshot(db_path)
    content, message, entry, field = BAD_INPUTS[case]
    path = tmp_path / f"{case}.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    # the bad file comes after a good one, so a partial write would show
    good = write_json(tmp_path / "good.json", [{"id": "new/1", "name": "N", "description": "fresh"}])
    result = cli("ingest", good, path, "--format", "a2x")
    assert result.code == 1
    assert str(path) in result.err and message in result.err
    if entry:
        assert f"entry {entry}" in result.err or entry in result.err
    if field:
        assert f"field '{field}'" in result.err
    assert snapshot(db_path) == before


def test_non_utf8_file(cli, db_path: Path, tmp_path: Path) -> None:
    path = tmp_path / "latin1.json"
    path.write_bytes('[{"id": "x", "name": "Café", "description": "d"}]'.encode("latin-1"))
    result = cli("ingest", path)
    assert result.code == 1 and "not UTF-8" in result.err and "latin1.json" in result.err and "line 1" in result.err
    assert_nothing_stored(db_path)


def test_unreadable_file(cli, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_json(tmp_path / "locked.json", good_entries())
    original = os.open

    def refuse(file, *args, **kwargs):    # as root every file can be read: refuse this one the way EACCES would
        if str(file).endswith("locked.json"):
            raise PermissionError(13, "Permission denied")
        return original(file, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse)
    result = cli("ingest", path)
    assert result.code == 1 and "locked.json" in result.err and "cannot read file: Permission denied" in result.err


def test_missing_path_and_unknown_format(cli, tmp_path: Path) -> None:
    missing = cli("ingest", tmp_path / "nope.json")
    assert missing.code == 1 and "nope.json" in missing.err and "no such file" in missing.err
    unknown = cli("ingest", FIXTURES / "services.csv", "--format", "xml")
    assert unknown.code == 1 and "unknown format 'xml'" in unknown.err


def test_description_over_the_size_limit(cli, db_path: Path, tmp_path: Path) -> None:
    path = write_json(tmp_path / "long.json", [{"id": "long/1", "name": "L", "description": "x" * 500}])
    result = cli("ingest", path, "--max-description-chars", "100")
    assert result.code == 1
    assert "long.json" in result.err and "entry 0 (id 'long/1')" in result.err
    assert "field 'description'" in result.err and "over the limit of 100" in result.err
    assert cli("ingest", path).code == 0  # the configured default accepts it


def test_bad_input_in_other_formats(cli, db_path: Path, tmp_path: Path) -> None:
    tools = write_json(tmp_path / "srv.json", {"tools": [{"name": "ok", "description": "fine"},
                                                          {"name": "broken"}]})
    result = cli("ingest", tools)
    assert result.code == 1 and "entry 1 (tool 'broken')" in result.err and "field 'description'" in result.err

    card = write_json(tmp_path / "card.json", {"name": "Agent", "description": "d", "skills": [{"id": "s"}]})
    result = cli("ingest", card)
    assert result.code == 1 and "field 'skills[0].name'" in result.err

    csv_path = tmp_path / "bad.csv"
    csv_path.write_text("id,name\nx,X\n", encoding="utf-8")
    result = cli("ingest", csv_path)
    assert result.code == 1 and "lacks column(s) description" in result.err

    jsonl = tmp_path / "bad.jsonl"
    jsonl.write_text('{"id": "a", "name": "A", "description": "d"}\n{"id": "b", "name": "B"\n', encoding="utf-8")
    result = cli("ingest", jsonl)
    assert result.code == 1 and "entry line 2" in result.err and "malformed JSON" in result.err

    skill = tmp_path / "skills" / "broken"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: broken\ndescription: [unclosed\n---\n", encoding="utf-8")
    result = cli("ingest", tmp_path / "skills")
    assert result.code == 1 and "SKILL.md" in result.err and "not valid YAML" in result.err
    (skill / "SKILL.md").write_text("# no front matter\n", encoding="utf-8")
    result = cli("ingest", tmp_path / "skills")
    assert result.code == 1 and "no YAML front matter" in result.err
    assert_nothing_stored(db_path)


def test_query_file_is_recognised_and_refused(cli) -> None:
    result = cli("ingest", DATA / "toolret" / "queries_dev.json")
    assert result.code == 1 and "benchmark query file" in result.err and "eval --queries" in result.err


def test_dry_run_writes_nothing(cli, db_path: Path) -> None:
    result = cli("ingest", SAMPLE, "--dry-run", "--json")
    assert result.code == 0 and result.json()["added"] > 300
    assert cli("stats", "--json").json()["services"] == 0


def test_a_dry_run_says_what_the_registry_would_hold(cli, db_path: Path, tmp_path: Path) -> None:
    entries = good_entries()
    assert cli("ingest", write_json(tmp_path / "v1.json", entries[:1])).code == 0
    second = write_json(tmp_path / "v2.json", entries)
    shown = cli("ingest", second, "--dry-run")
    assert shown.code == 0, shown.err
    added = len(entries) - 1
    assert f"would add {added}" in shown.out and "now holds" not in shown.out
    assert f"registry would hold {len(entries)} services (before: 1)" in shown.out
    data = cli("ingest", second, "--dry-run", "--json").json()
    assert (data["services_before"], data["services_after"], data["added"]) == (1, len(entries), added)
    real = cli("ingest", second, "--json").json()
    assert (real["services_before"], real["services_after"]) == (1, len(entries))
    assert cli("stats", "--json").json()["services"] == len(entries)


def test_ingest_and_sync_report_changes_alike(cli, db_path: Path, tmp_path: Path) -> None:
    """Counts under the kind's name, ids under `<kind>_ids`, fields under `updated_fields`: in both reports."""
    entries = good_entries()
    assert cli("ingest", write_json(tmp_path / "v1.json", entries)).code == 0
    entries[0]["description"] = "Changed."
    ingested = cli("ingest", write_json(tmp_path / "v2.json", entries), "--replace", "--json").json()
    entries[1]["description"] = "Changed too."
    synced = cli("ingest", write_json(tmp_path / "v3.json", entries[1:]), "--sync", "--force", "--json").json()
    for report, updated in ((ingested, entries[0]["id"]), (synced, entries[1]["id"])):
        assert report["updated"] == 1 and report["updated_ids"] == [updated], report
        assert report["updated_fields"] == {updated: ["description"]}
        assert isinstance(report["added"], int) and isinstance(report["added_ids"], list)
    assert synced["removed"] == 1 and synced["removed_ids"] == [entries[0]["id"]]
