"""Property: any input, in any format, either ingests completely or fails cleanly (an a2x-local error naming what is
wrong) with the database exactly as it was. Hypothesis writes the inputs: well-formed entries with hostile text
(control characters, lone surrogates, brackets and markers, deep or large metadata), broken structure, and garbage.

Example counts stay small (the whole module runs in well under a minute on 2 cores); every run draws new examples.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from a2x_local.db import connect
from a2x_local.errors import A2XError
from a2x_local.registry import Limits, Registry, ingest
from tests.support.registries import make_registry, snapshot

EXAMPLES = 25
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
# Small limits, so oversized and over-deep inputs are reached by small examples.
LIMITS = Limits(max_description_chars=200, max_name_chars=40, max_metadata_bytes=2000, max_file_bytes=200_000,
                max_json_depth=6)

# Any character, surrogates and controls included, weighted towards the ones that break things.
nasty = st.sampled_from(["\x00", "\x1b[2J", "\x07", "\x9b", "\ud800", "\udfff", "<|im_start|>", "[/bold]", "\n",
                         "\r", "\t", "\"", "'", ",", "---", "*a", "&a", "\ufeff", "é", "漢"])
text = st.lists(st.one_of(st.text(st.characters(blacklist_categories=()), max_size=8), nasty),
                max_size=6).map("".join)
plain = st.text(st.characters(whitelist_categories=("Ll", "Lu", "Nd")), min_size=1, max_size=12)
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), text)
json_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                            st.dictionaries(plain, inner, max_size=3)), max_leaves=12)


# A sensible value with one hostile piece inside: gets past the type checks to the checks on content.
hostile = st.tuples(plain, nasty, plain).map("".join)


def field_value(good: st.SearchStrategy) -> st.SearchStrategy:
    """Mostly a sensible value, often one with a hostile piece, sometimes anything at all."""
    return st.one_of(good, good, hostile, text, json_values)


entry = st.fixed_dictionaries(
    {"id": field_value(plain), "name": field_value(plain), "description": field_value(plain.map(lambda s: s + " x"))},
    optional={"type": st.sampled_from(["generic", "mcp_tool", "skill", "bogus"]), "metadata": json_values,
              "extra": json_values})


def service_list(entries): return entries
def mcp_tools(entries): return {"tools": [{k: v for k, v in e.items() if k != "id"} | {"inputSchema": {}}
                                          for e in entries]}
def mcp_servers(entries): return {"servers": [e | {"$schema": "https://x/server.schema.json"} for e in entries]}
def a2a_cards(entries): return [e | {"skills": [{"name": e.get("name"), "description": e.get("description")}],
                                     "capabilities": {}} for e in entries]


JSON_SHAPES = {"a2x": service_list, "mcp-tools": mcp_tools, "mcp-server": mcp_servers, "a2a-card": a2a_cards}


def encode(content: str) -> bytes:
    # Lone surrogates cannot be UTF-8: written as the bytes Python would produce, they make a non-UTF-8 file.
    return content.encode("utf-8", errors="surrogatepass")


@st.composite
def json_file(draw) -> tuple[str, bytes]:
    shape = draw(st.sampled_from(sorted(JSON_SHAPES)))
    data = JSON_SHAPES[shape](draw(st.lists(entry, min_size=1, max_size=4)))
    content = json.dumps(data, ensure_ascii=draw(st.booleans()))
    if draw(st.integers(0, 9)) == 0:            # sometimes broken: cut, or buried in brackets
        depth = draw(st.sampled_from([10, 3000]))
        content = draw(st.sampled_from([content[: len(content) // 2], "[" * depth + content + "]" * depth]))
    return "services.json", encode(content)


@st.composite
def jsonl_file(draw) -> tuple[str, bytes]:
    lines = [json.dumps(e) for e in draw(st.lists(entry, min_size=1, max_size=4))]
    lines += draw(st.lists(text, max_size=1))   # sometimes a line that is not JSON at all
    return "services.jsonl", encode("\n".join(draw(st.permutations(lines))))


@st.composite
def csv_file(draw) -> tuple[str, bytes]:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    header = draw(st.sampled_from([["id", "name", "description"], ["id", "name", "description", "metadata"],
                                   ["id", "name"]]))
    writer.writerow(header)
    for _ in range(draw(st.integers(1, 4))):
        row = [draw(st.one_of(plain, text)) for _ in header]
        if "metadata" in header:
            row[-1] = draw(st.one_of(json_values.map(json.dumps), text))
        writer.writerow(row[: draw(st.integers(len(row) - 1, len(row)))] + draw(st.lists(text, max_size=1)))
    return "services.csv", encode(buffer.getvalue())


@st.composite
def skill_file(draw) -> tuple[str, bytes]:
    meta = draw(st.fixed_dictionaries({"name": field_value(plain), "description": field_value(plain)},
                                      optional={"tags": json_values}))
    front = yaml.safe_dump(meta, allow_unicode=True) if draw(st.booleans()) else draw(text)
    if draw(st.integers(0, 4)) == 0:
        front += "a: &x [1, 2]\nb: [*x, *x]\n"   # an alias, which is refused
    return "SKILL.md", encode(f"---\n{front}---\n{draw(text)}\n")


garbage = st.tuples(st.sampled_from(["services.json", "x.jsonl", "x.csv", "SKILL.md"]), st.binary(max_size=200))
any_file = st.one_of(json_file(), jsonl_file(), csv_file(), skill_file(), garbage)


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """A registry of ten services; each example ingests into a fresh copy of it."""
    return make_registry(tmp_path_factory.mktemp("fuzz") / "template.duckdb")


def check_all_or_nothing(template: Path, files: list[tuple[str, bytes]]) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        db = Path(shutil.copy(template, folder / "r.duckdb"))
        inputs = folder / "in"
        for number, (name, content) in enumerate(files):
            path = inputs / f"part{number}" / name
            path.parent.mkdir(parents=True)
            path.write_bytes(content)
        before = snapshot(db)
        try:
            with connect(db) as con:
                report = ingest(con, [inputs], limits=LIMITS)
        except A2XError as exc:                        # a clean failure: says what, and changed nothing
            assert exc.message
            assert snapshot(db) == before
            return
        services, runs = snapshot(db)
        assert len(runs) == len(before[1]) + 1
        assert len(services) == len(before[0]) + len(report.added)
        with connect(db) as con:
            stored = Registry(con).get_many(report.added)
        assert set(stored) == set(report.added)


@FUZZ
@given(files=st.lists(any_file, min_size=1, max_size=3))
def test_any_input_ingests_fully_or_fails_cleanly(template, files):
    check_all_or_nothing(template, files)


@FUZZ
@given(file=json_file())
def test_any_json_service_file(template, file):
    check_all_or_nothing(template, [file])
