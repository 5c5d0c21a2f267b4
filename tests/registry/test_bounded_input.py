"""Hostile input: every probe ends in one `error:` line naming the file (and entry and field), exit code 1, JSON under
--json, and a database exactly as it was. YAML aliases, deep JSON, lone surrogates, huge CSV fields, huge metadata,
terminal control characters, unreadable folders and symlink loops."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from a2x_local.db import connect
from tests.support.paths import SAMPLE
from tests.support.registries import snapshot


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def entries(**changes: object) -> list[dict]:
    entry = {"id": "svc/a", "name": "Alpha", "description": "Does alpha things."}
    entry.update(changes)
    return [entry]


def refused(cli, db_path: Path, *args: object, expect: tuple[str, ...]) -> dict:
    """Run an ingest that must fail cleanly; returns its JSON error."""
    before = snapshot(db_path)
    result = cli("ingest", *args, "--json")
    assert result.code == 1, result.err
    assert "Traceback" not in result.err
    assert result.err.startswith("error:"), result.err
    for text in expect:
        assert text in result.err, (text, result.err)
    error = result.json()
    assert error["error"] and error["message"]
    assert snapshot(db_path) in ((before,) if before else ((), ([], [])))
    return error


ALIAS_BOMB = """---
name: bomb
description: a skill whose front matter multiplies
a: &a ["x","x","x","x","x","x","x","x","x","x"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]
---
body
"""


def test_a_yaml_alias_bomb_is_refused_before_it_expands(cli, db_path, tmp_path):
    skill = write(tmp_path / "skills" / "bomb" / "SKILL.md", ALIAS_BOMB)
    assert len(ALIAS_BOMB.encode()) < 400
    refused(cli, db_path, skill.parent.parent, expect=(str(skill), "alias"))


def test_one_yaml_alias_is_refused_too(cli, db_path, tmp_path):
    text = "---\nname: s\ndescription: d\nx: &x [1]\ny: *x\n---\n"
    refused(cli, db_path, write(tmp_path / "s" / "SKILL.md", text), expect=("alias", "line 5"))


def test_deeply_nested_yaml_is_an_input_error(cli, db_path, tmp_path):
    text = "---\nname: s\ndescription: d\nx: " + "[" * 20000 + "]" * 20000 + "\n---\n"
    refused(cli, db_path, write(tmp_path / "s" / "SKILL.md", text), expect=("nested",))


@pytest.mark.parametrize("depth", [100_000, 200])
def test_deeply_nested_json_is_an_input_error(cli, db_path, tmp_path, depth):
    refused(cli, db_path, write(tmp_path / "deep.json", "[" * depth + "]" * depth),
            expect=("deep.json", "nested"))


def test_deep_metadata_inside_a_valid_entry_names_the_field(cli, db_path, tmp_path):
    deep: object = "leaf"
    for _ in range(150):
        deep = {"x": deep}
    refused(cli, db_path, write(tmp_path / "s.json", json.dumps(entries(metadata=deep))),
            expect=("s.json", "metadata", "nested", "$[0].metadata.x.x"))


def test_a_lone_surrogate_is_refused_with_its_field(cli, db_path, tmp_path):
    text = '[{"id": "svc/a", "name": "Alpha", "description": "bad \\ud800 here"}]'
    refused(cli, db_path, write(tmp_path / "s.json", text), expect=("s.json", "description", "surrogate"))


def test_a_lone_surrogate_in_metadata_is_refused(cli, db_path, tmp_path):
    text = '{"id": "svc/a", "name": "Alpha", "description": "fine", "metadata": {"k": "\\udfff"}}\n'
    refused(cli, db_path, write(tmp_path / "s.jsonl", text), expect=("s.jsonl", "line 1", "metadata", "surrogate"))


def test_a_csv_field_over_the_csv_module_limit_is_an_input_error(cli, db_path, tmp_path):
    text = 'id,name,description\nx,n,"' + "a" * 200_000 + '"\n'
    refused(cli, db_path, write(tmp_path / "big.csv", text), expect=("big.csv", "line 2"))


def test_a_long_csv_metadata_column_within_the_limits_is_accepted(cli, db_path, tmp_path):
    metadata = json.dumps({"blob": "y" * 150_000}).replace('"', '""')
    text = f'id,name,description,metadata\nx,n,d,"{metadata}"\n'
    result = cli("ingest", write(tmp_path / "ok.csv", text), "--json")
    assert result.code == 0, result.err
    assert len(cli("services", "show", "x", "--json").json()["metadata"]["blob"]) == 150_000


def test_metadata_over_the_per_service_cap_is_refused(cli, db_path, tmp_path):
    big = entries(metadata={"blob": "x" * (3 * 1024 * 1024)})
    error = refused(cli, db_path, write(tmp_path / "m.jsonl", json.dumps(big[0]) + "\n"),
                    expect=("m.jsonl", "line 1", "metadata", "max_metadata_bytes"))
    assert error["error"] == "InputError"


def test_fifty_megabytes_of_metadata_is_refused_cleanly(cli, db_path, tmp_path):
    big = entries(metadata={"blob": "x" * (50 * 1024 * 1024)})
    refused(cli, db_path, write(tmp_path / "m.json", json.dumps(big)), expect=("m.json", "metadata"))


def test_a_file_over_the_per_file_cap_is_refused_before_it_is_read(cli, db_path, tmp_path, home):
    write(home / "config.toml", "[registry]\nmax_file_bytes = 1000\n")
    many = [{"id": f"s{i}", "name": f"n{i}", "description": "d" * 40} for i in range(40)]
    refused(cli, db_path, write(tmp_path / "many.json", json.dumps(many)), expect=("many.json", "max_file_bytes"))


@pytest.mark.parametrize("field,value", [("id", "x\x1b[2J"), ("name", "bell\x07"), ("description", "nul\x00 byte"),
                                         ("description", "c1 \x9b31m"), ("name", "del\x7f")])
def test_terminal_control_characters_are_refused(cli, db_path, tmp_path, field, value):
    text = json.dumps(entries(**{field: value}))
    error = refused(cli, db_path, write(tmp_path / "c.json", text), expect=("c.json", f"'{field}'", "control"))
    assert "\x1b" not in error["message"] and "\x07" not in error["message"]


def test_newlines_and_tabs_stay_allowed_in_descriptions(cli, db_path, tmp_path):
    text = json.dumps(entries(description="Line one.\n\tLine two."))
    assert cli("ingest", write(tmp_path / "ok.json", text)).code == 0


def test_an_unreadable_sub_folder_fails_the_ingest_with_its_path(cli, db_path, tmp_path, monkeypatch):
    folder = tmp_path / "in"
    write(folder / "a.json", json.dumps(entries()))
    hidden = folder / "hidden"
    write(hidden / "b.json", json.dumps(entries(id="svc/b")))
    real_scandir = os.scandir

    def scandir(path=".", *args):
        if Path(path) == hidden:
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path, *args)

    # As root, chmod 000 does not stop reads: the kernel's answer to an unprivileged user is simulated instead.
    monkeypatch.setattr(os, "scandir", scandir)
    refused(cli, db_path, folder, expect=(str(hidden), "ermission denied"))


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads folders whatever their mode")
def test_a_chmod_000_sub_folder_fails_the_ingest(cli, db_path, tmp_path):
    folder = tmp_path / "in"
    write(folder / "a.json", json.dumps(entries()))
    hidden = folder / "hidden"
    write(hidden / "b.json", json.dumps(entries(id="svc/b")))
    hidden.chmod(0)
    try:
        refused(cli, db_path, folder, expect=(str(hidden),))
    finally:
        hidden.chmod(0o755)


def test_a_symlink_loop_is_reported(cli, db_path, tmp_path):
    folder = tmp_path / "in"
    write(folder / "a.json", json.dumps(entries()))
    (folder / "sub").mkdir()
    (folder / "sub" / "loop").symlink_to(folder, target_is_directory=True)
    refused(cli, db_path, folder, expect=(str(folder / "sub" / "loop"), "loop"))


def test_a_broken_symlink_to_a_service_file_is_reported(cli, db_path, tmp_path):
    folder = tmp_path / "in"
    write(folder / "a.json", json.dumps(entries()))
    (folder / "gone.json").symlink_to(tmp_path / "missing.json")
    refused(cli, db_path, folder, expect=(str(folder / "gone.json"), "broken"))


def test_a_symlinked_sub_folder_is_read(cli, db_path, tmp_path):
    folder = tmp_path / "in"
    write(folder / "a.json", json.dumps(entries()))
    elsewhere = tmp_path / "elsewhere"
    write(elsewhere / "b.json", json.dumps(entries(id="svc/b")))
    (folder / "linked").symlink_to(elsewhere, target_is_directory=True)
    result = cli("ingest", folder, "--json")
    assert result.code == 0, result.err
    assert result.json()["added"] == 2


def test_the_sample_still_ingests(cli):
    result = cli("ingest", SAMPLE, "--json")
    assert result.code == 0, result.err
    assert result.json()["added"] > 0


def test_metadata_over_duckdbs_default_object_size_is_stored_when_the_limit_allows(cli, db_path, tmp_path, home):
    write(home / "config.toml", "[registry]\nmax_metadata_bytes = 33554432\n")
    big = entries(metadata={"blob": "x" * (17 * 1024 * 1024)})
    result = cli("ingest", write(tmp_path / "m.jsonl", json.dumps(big[0]) + "\n"))
    assert result.code == 0, result.err
    with connect(db_path) as con:
        assert con.execute("SELECT length(metadata::VARCHAR) FROM services").fetchone()[0] > 17 * 1024 * 1024
