"""Steps files: one decomposition or one per request, ids renumbered, bad entries named with file, entry, field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from a2x_local.compose.steps_file import StepsBounds, load_steps_file
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


def _chain(count: int, task: str = "look up the weather") -> dict:
    return {"steps": [{"id": f"a{i}", "task": f"{task} {i}", "depends_on": [f"a{i - 1}"] if i else []}
                      for i in range(count)]}


def test_a_steps_file_obeys_max_steps_and_step_chars(tmp_path: Path) -> None:
    """Ten thousand chained steps took ten minutes to plan: a decomposition holds at most max_steps steps, as the
    model's and the rules' do, and is refused before any step is looked at."""
    bounds = StepsBounds(max_steps=6, step_chars=40)
    with pytest.raises(InputError, match=r"entry 0: field 'steps': 10,000 steps, more than \[compose\] max_steps = 6"):
        load_steps_file(_write(tmp_path, _chain(10_000)), bounds=bounds)
    with pytest.raises(InputError, match=r"field 'steps\[1\].task': the task has 45 characters"):
        load_steps_file(_write(tmp_path, {"steps": ["short", "x" * 45]}), bounds=bounds)
    per_request = [{"query": "q", "steps": [f"s{i}" for i in range(7)]}]
    with pytest.raises(InputError, match=r"entry 0 \(query 'q'\): field 'steps': 7 steps"):
        load_steps_file(_write(tmp_path, per_request), bounds=bounds)
    assert len(load_steps_file(_write(tmp_path, _chain(6)), bounds=bounds).steps_for("x")) == 6


def test_a_steps_file_over_the_byte_cap_is_refused_by_its_size(tmp_path: Path) -> None:
    path = _write(tmp_path, {"steps": ["x" * 3000]})
    with pytest.raises(InputError, match="over the limit of 2,048"):
        load_steps_file(path, max_bytes=2048)


def test_compose_refuses_a_steps_file_beyond_the_configured_bounds(cli, registry_db, home, tmp_path: Path) -> None:
    steps = _write(tmp_path, _chain(21))
    result = cli("compose", "plan a trip", "--steps", steps, "--method", "bm25", "--json")
    assert result.code == 1 and "21 steps, more than [compose] max_steps = 6" in result.err, result.err
    assert "hint:" in result.err
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("[compose]\nmax_steps_file_bytes = 2048\n", encoding="utf-8")
    padded = _write(tmp_path, {"steps": ["find the weather"], "note": "x" * 4096}, "padded.json")
    too_big = cli("compose", "plan a trip", "--steps", padded, "--method", "bm25")
    assert too_big.code == 1 and "over the limit of 2,048" in too_big.err, too_big.err
