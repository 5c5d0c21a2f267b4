"""The one JSON reader (a2x_local/jsonfiles.py): bounded in size and in depth, and the reader every JSON file of the
package goes through (the other readers are checked in the source, and through their public functions)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from a2x_local.compose.steps_file import load_steps_file
from a2x_local.errors import InputError
from a2x_local.evaluation import load_queries
from a2x_local.jsonfiles import JsonLimits, json_lines, read_json, read_json_file
from a2x_local.taxonomy import read_tree_file

ROOT = Path(__file__).resolve().parents[1]
SMALL = JsonLimits(max_file_bytes=200, max_json_depth=4)


def test_the_limits_are_the_registry_tables_keys():
    defaults = JsonLimits.defaults()
    assert defaults.max_file_bytes > 10_000_000 and 10 <= defaults.max_json_depth <= 500
    config = {"registry": {"max_file_bytes": 5, "max_json_depth": 3}}
    assert JsonLimits.of(config) == JsonLimits(5, 3)
    assert JsonLimits(5, 3).allowing_depth(9) == JsonLimits(5, 9)
    assert JsonLimits(5, 3).allowing_depth(2) == JsonLimits(5, 3)


def test_a_file_over_the_size_limit_is_refused_by_its_size(tmp_path: Path):
    path = tmp_path / "big.json"
    path.write_text(json.dumps(["x" * 300]), encoding="utf-8")
    with pytest.raises(InputError, match=r"big.json: is 30\d bytes, over the limit of 200") as caught:
        read_json(path, SMALL)
    assert "max_file_bytes" in caught.value.hint
    assert read_json(path, JsonLimits(400, 4)) == ["x" * 300]


@pytest.mark.parametrize("nesting", [5, 50, 100_000])
def test_nesting_over_the_depth_limit_is_refused_without_a_recursion_error(tmp_path: Path, nesting: int):
    path = tmp_path / "deep.json"
    path.write_text("[" * nesting + "]" * nesting, encoding="utf-8")
    with pytest.raises(InputError, match="nested too deeply") as caught:
        read_json(path, JsonLimits(10_000_000, 4))
    assert "max_json_depth" in caught.value.hint and "deep.json" in caught.value.message


def test_nesting_within_the_limit_is_read(tmp_path: Path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 50 + "]" * 50, encoding="utf-8")
    value = read_json(path, JsonLimits(10_000, 50))
    for _ in range(49):
        value = value[0]
    assert value == []


def test_json_lines_are_bounded_per_line_and_name_the_line(tmp_path: Path):
    assert json_lines('{"a": 1}\n\n{"b": [2]}\n', "f.jsonl", SMALL) == [("line 1", {"a": 1}), ("line 3", {"b": [2]})]
    with pytest.raises(InputError, match=r"f.jsonl: entry line 2: is nested too deeply"):
        json_lines('{"a": 1}\n[[[[[1]]]]]\n', "f.jsonl", SMALL)
    with pytest.raises(InputError, match=r"line 2 is not valid JSON \(malformed JSON at column 2\)"):
        json_lines('{"a": 1}\n{oops\n', "f.jsonl", SMALL)
    path = tmp_path / "q.jsonl"
    path.write_text('{"a": 1}\n' * 30, encoding="utf-8")
    with pytest.raises(InputError, match="over the limit of 200"):
        read_json_file(path, what="test", hint="h", limits=SMALL)


def test_every_reader_of_input_files_is_bounded(tmp_path: Path):
    pad = "x" * 200
    queries = tmp_path / "queries.json"
    queries.write_text(json.dumps([{"id": "q", "query": "x", "correct_tools": [{"id": "a"}], "pad": pad}]))
    steps = tmp_path / "steps.json"
    steps.write_text(json.dumps({"steps": ["a"], "pad": pad}))
    tree = tmp_path / "tree.json"
    tree.write_text(json.dumps({"format": "a2x-tree", "version": 1, "root": {"name": "All", "description": pad}}))
    for read, path in ((load_queries, queries), (load_steps_file, steps), (read_tree_file, tree)):
        with pytest.raises(InputError, match="over the limit of 100"):
            read(path, JsonLimits(100, 64))
        read(path, JsonLimits(1000, 64))
    deep = json.loads("[" * 10 + "]" * 10)
    steps.write_text(json.dumps({"steps": ["a"], "pad": deep}))
    with pytest.raises(InputError, match="nested too deeply"):
        load_steps_file(steps, JsonLimits(10_000, 4))
    queries.write_text(json.dumps([{"id": "q", "query": "x", "correct_tools": [{"id": "a"}], "pad": deep}]))
    with pytest.raises(InputError, match="nested too deeply"):
        load_queries(queries, JsonLimits(10_000, 4))


def test_a_tree_file_may_nest_as_deep_as_its_deepest_tree_but_no_deeper(tmp_path: Path):
    """A tree nests two JSON levels per tree level, so the reader allows what 32 levels need (the importer's own
    rule refuses deeper trees with its own message), and refuses files nested deeper than any tree can."""
    node: dict = {"name": "leaf", "description": "x"}
    for level in range(32):
        node = {"name": f"n{level}", "description": "x", "children": [node]}
    tree = tmp_path / "tree.json"
    tree.write_text(json.dumps({"format": "a2x-tree", "version": 1, "root": node}))
    assert read_tree_file(tree, JsonLimits(10_000_000, 64))["root"]["name"] == "n31"
    tree.write_text(json.dumps({"format": "a2x-tree", "version": 1, "root": {
        "name": "All", "description": "x", "keywords": json.loads("[" * 80 + "]" * 80)}}))
    with pytest.raises(InputError, match="nested too deeply"):
        read_tree_file(tree, JsonLimits(10_000_000, 64))


def _reads_a_file_as_json(node: ast.Call) -> bool:
    """`json.load(handle)`, or `json.loads(...)` of text read from a file right there."""
    func = node.func
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "json"):
        return False
    if func.attr == "load":
        return True
    return func.attr == "loads" and any(
        isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute)
        and inner.func.attr in {"read_text", "read_bytes", "read"} for arg in node.args for inner in ast.walk(arg))


def test_no_module_reads_json_files_by_itself():
    found = []
    for path in sorted((ROOT / "a2x_local").rglob("*.py")):
        if path.name == "jsonfiles.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [f"{path.relative_to(ROOT)}:{node.lineno}" for node in ast.walk(tree)
                  if isinstance(node, ast.Call) and _reads_a_file_as_json(node)]
    assert not found, "read JSON files through a2x_local.jsonfiles (bounded):\n" + "\n".join(found)
    probe = ast.parse("json.loads(path.read_text())").body[0].value
    assert isinstance(probe, ast.Call) and _reads_a_file_as_json(probe), "the check finds what it looks for"


@pytest.mark.parametrize("number", ["9" * 5000, "-" + "1" * 4301])
def test_an_integer_of_thousands_of_digits_is_an_error_naming_file_field_and_place(tmp_path: Path, number: str):
    """Issue 32, fourth round: `ingest huge.json --dry-run` with metadata {"n": 9...9} was "unexpected ValueError:
    Exceeds the limit (4300 digits) ... this is a bug"."""
    path = tmp_path / "huge.json"
    path.write_text('[{"id": "svc.two", "metadata": {"n": ' + number + "}}]")
    with pytest.raises(InputError, match="holds an integer of more than 4,300 digits at line 1, column 38") as caught:
        read_json(path)
    assert str(path) in caught.value.message and "field '[0].metadata.n'" in caught.value.message
    path.write_text('{"n": ' + "9" * 4300 + "}")          # at the limit: read as before
    assert read_json(path) == {"n": int("9" * 4300)}


def test_a_long_integer_is_named_in_json_lines_and_pretty_json_and_a_long_float_is_read(tmp_path: Path):
    """A JSON Lines file names the line; a JSON document over several lines starting with "{" is not read again as
    JSON Lines (which would hide the number behind "line 1 is not valid JSON"); digits in a string or a float's are
    no integer."""
    lines = tmp_path / "services.jsonl"
    lines.write_text('{"id": "a"}\n{"id": "b", "metadata": {"n": ' + "9" * 5000 + "}}\n")
    with pytest.raises(InputError, match="4,300 digits") as caught:
        read_json_file(lines, what="services", hint="")
    assert "entry line 2: field 'metadata.n'" in caught.value.message, caught.value.message
    pretty = tmp_path / "pretty.json"
    pretty.write_text('{\n  "s": "' + "9" * 5000 + '",\n  "n": ' + "9" * 5000 + "\n}\n")
    with pytest.raises(InputError, match="at line 3, column 8") as caught:
        read_json_file(pretty, what="services", hint="")
    assert "field 'n'" in caught.value.message, caught.value.message
    pretty.write_text('{"f": ' + "9" * 5000 + ".5}")
    assert read_json(pretty)["f"] > 1e300
