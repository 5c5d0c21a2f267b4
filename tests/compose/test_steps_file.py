"""Steps files: one decomposition or one per request, ids renumbered, bad entries named with file, entry, field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from a2x_local.compose.steps_file import load_steps_file
from a2x_local.errors import InputError, UserError


def _write(tmp_path: Path, data: object, name: str = "steps.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def test_one_decomposition_serves_any_request(tmp_path: Path) -> None:
    book = load_steps_file(_write(tmp_path, {"steps": [
        {"id": "check", "task": "check seats"}, {"id": "change", "task": "change  ticket", "depends_on": ["check"]}]}))
    steps = book.steps_for("anything at all")
    assert [(s.id, s.task, s.depends_on) for s in steps] == [("s1", "check seats", []),
                                                            ("s2", "change ticket", ["s1"])]
    assert book.label == "file:steps.json"
    assert [s.task for s in load_steps_file(_write(tmp_path, ["a", "b"], "bare.json")).steps_for("x")] == ["a", "b"]


def test_decompositions_per_request_match_by_text(tmp_path: Path) -> None:
    lines = [{"query": "Weather  in Rome", "steps": ["get the weather"]},
             {"id": "q2", "query": "no steps here", "correct_tools": ["a"]},      # a query file entry without steps
             {"query": "Seats then ticket", "steps": [{"task": "seats", "correct_tools": ["a"]}, "ticket"]}]
    book = load_steps_file(_write(tmp_path, "\n".join(json.dumps(line) for line in lines), "steps.jsonl"))
    assert [s.task for s in book.steps_for("weather in  rome")] == ["get the weather"]
    assert len(book.steps_for("Seats then ticket")) == 2
    with pytest.raises(UserError, match="no steps for the request 'no steps here'"):
        book.check_covers(["Weather in Rome", "no steps here"])


@pytest.mark.parametrize(("data", "needle"), [
    ({"steps": []}, "field 'steps': expected a non-empty list of steps"),
    ({"steps": [{"task": " "}]}, "field 'steps[0].task': missing or empty task"),
    ({"steps": [{"task": "a", "depends_on": ["s2"]}, {"task": "b"}]},
     "field 'steps[0].depends_on': depends on 's2', which is not an earlier step"),
    ({"steps": [{"id": "x", "task": "a"}, {"id": "x", "task": "b"}]}, "field 'steps[1].id'"),
    ([{"query": "q", "steps": [7]}], "entry 0 (query 'q'): field 'steps[0]': a step is a string or an object"),
    ([{"query": "only a query"}], "no entry carries 'steps'"),
    ("{not json", "not valid JSON"),
])
def test_bad_files_name_the_entry_and_field(tmp_path: Path, data: object, needle: str) -> None:
    path = _write(tmp_path, data)
    with pytest.raises(InputError) as caught:
        load_steps_file(path)
    assert str(path) in caught.value.message and needle in caught.value.message


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="steps file not found"):
        load_steps_file(tmp_path / "nope.json")


def test_jsonl_is_read_as_query_files_are_and_errors_name_the_line(tmp_path: Path) -> None:
    one = load_steps_file(_write(tmp_path, json.dumps({"steps": ["a", "b"]}) + "\n", "one.jsonl"))
    assert [s.task for s in one.steps_for("x")] == ["a", "b"]          # one line: that line's decomposition
    entries = [{"query": "q", "steps": ["a"]}, {"query": "r", "steps": [7]}]
    with pytest.raises(InputError) as caught:
        load_steps_file(_write(tmp_path, "\n".join(json.dumps(e) for e in entries), "two.jsonl"))
    assert caught.value.entry == "line 2 (query 'r')"
    with pytest.raises(InputError, match="line 2 is not valid JSON"):
        load_steps_file(_write(tmp_path, json.dumps(entries[0]) + "\n{oops\n", "bad.json"))
