"""Query files: the benchmark format loads; every malformed entry is named with its field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from a2x_local.errors import InputError, UserError
from a2x_local.evaluation.queries import load_queries, load_query_texts
from tests.support.paths import TOOLRET


def _write(tmp_path: Path, data: object, name: str = "q.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def test_benchmark_format_json_and_jsonl(tmp_path: Path) -> None:
    entries = [{"id": "q1", "query": "weather in Paris", "correct_tools": [{"id": "weather"}]},
               {"id": 2, "query": " convert money ", "correct_tools": [{"id": "currency"}, "fx", {"id": "fx"}]}]
    from_json = load_queries(_write(tmp_path, entries))
    jsonl = "\n".join(json.dumps(e) for e in entries) + "\n\n"
    from_jsonl = load_queries(_write(tmp_path, jsonl, "q.jsonl"))
    assert from_json == from_jsonl
    assert [q.id for q in from_json] == ["q1", "2"]
    assert from_json[1].query == "convert money"
    assert from_json[1].correct == ("currency", "fx")  # a repeated correct id counts once


def test_real_toolret_dev_queries_load() -> None:
    queries = load_queries(TOOLRET / "queries_dev.json")
    assert len(queries) == 864
    assert all(q.correct for q in queries)


@pytest.mark.parametrize(("entry", "field", "needle"), [
    ({"query": "x", "correct_tools": [{"id": "a"}]}, "id", "missing or empty query id"),
    ({"id": "q9", "correct_tools": [{"id": "a"}]}, "query", "missing or empty query text"),
    ({"id": "q9", "query": "  ", "correct_tools": [{"id": "a"}]}, "query", "missing or empty query text"),
    ({"id": "q9", "query": "x"}, "correct_tools", "non-empty list"),
    ({"id": "q9", "query": "x", "correct_tools": []}, "correct_tools", "non-empty list"),
    ({"id": "q9", "query": "x", "correct_tools": [{"name": "a"}]}, "correct_tools[0].id", "non-empty string id"),
    ({"id": "q9", "query": "x", "correct_tools": [{"id": "a"}, 3.5]}, "correct_tools[1]", "non-empty string id"),
])
def test_malformed_entry_names_entry_and_field(tmp_path: Path, entry: dict, field: str, needle: str) -> None:
    good = {"id": "q0", "query": "fine", "correct_tools": [{"id": "a"}]}
    path = _write(tmp_path, [good, entry])
    with pytest.raises(InputError) as err:
        load_queries(path)
    assert err.value.field == field
    assert str(err.value.entry).startswith("1")
    assert needle in err.value.message
    assert str(path) in err.value.message


def test_duplicate_ids_and_wrong_shapes(tmp_path: Path) -> None:
    entry = {"id": "q1", "query": "x", "correct_tools": [{"id": "a"}]}
    with pytest.raises(InputError, match="duplicate query id"):
        load_queries(_write(tmp_path, [entry, entry]))
    with pytest.raises(InputError, match="expected an object"):
        load_queries(_write(tmp_path, [entry, "just a string"]))
    with pytest.raises(InputError, match="expected a JSON list"):
        load_queries(_write(tmp_path, '{\n  "queries": []\n}'))
    with pytest.raises(InputError, match="no queries"):
        load_queries(_write(tmp_path, []))
    with pytest.raises(InputError, match="empty"):
        load_queries(_write(tmp_path, "  \n"))
    with pytest.raises(InputError, match="not valid JSON"):
        load_queries(_write(tmp_path, '[{"id": "q1",'))
    with pytest.raises(InputError, match="line 2 is not valid JSON"):
        load_queries(_write(tmp_path, json.dumps(entry) + "\n{oops\n", "q.jsonl"))
    with pytest.raises(UserError, match="not found"):
        load_queries(tmp_path / "absent.json")


def test_query_texts_for_search(tmp_path: Path) -> None:
    assert load_query_texts(_write(tmp_path, "weather\n\n currency \n", "q.txt")) == ["weather", "currency"]
    assert load_query_texts(_write(tmp_path, ["a", {"query": "b", "id": 1}])) == ["a", "b"]
    with pytest.raises(InputError) as err:
        load_query_texts(_write(tmp_path, ["a", {"id": 1}]))
    assert (err.value.entry, err.value.field) == ("1", "query")


def test_reference_steps_are_read_and_checked(tmp_path: Path) -> None:
    path = tmp_path / "q.json"
    path.write_text(json.dumps([
        {"id": "1", "query": "seats then ticket", "correct_tools": [{"id": "a"}, {"id": "b"}],
         "steps": [{"task": "check seats", "correct_tools": [{"id": "a"}]}, {"task": "change", "correct_tools": ["b"]},
                   "say thanks"]},
        {"id": "2", "query": "plain", "correct_tools": ["c"]}]))
    first, second = load_queries(path)
    assert first.steps == (("a",), ("b",), ())
    assert second.steps is None
    path.write_text(json.dumps([{"id": "1", "query": "q", "correct_tools": ["a"], "steps": [{"correct_tools": [""]}]}]))
    with pytest.raises(InputError, match=r"entry 0 \(id '1'\): field 'steps\[0\]\.correct_tools\[0\]'"):
        load_queries(path)
    path.write_text(json.dumps([{"id": "1", "query": "q", "correct_tools": ["a"], "steps": []}]))
    with pytest.raises(InputError, match="field 'steps'"):
        load_queries(path)
