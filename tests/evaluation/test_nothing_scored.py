"""An evaluation that scores no query measured nothing: exit 1 with why, not a table of zeros and exit 0."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from a2x_local.search.methods import method_spec, register_method, unregister_method
from a2x_local.testing import ScriptedEngine

ELSEWHERE = [{"id": f"q{i}", "query": f"play song {i}", "correct_tools": [{"id": "music-player"}]} for i in range(3)]


def test_no_correct_service_in_the_registry_is_an_error(registry_db: Path, cli, tmp_path: Path) -> None:
    queries = tmp_path / "other.json"
    queries.write_text(json.dumps(ELSEWHERE), encoding="utf-8")
    result = cli("eval", "--queries", queries, "--method", "bm25", "--out", tmp_path / "run", "--no-plots",
                 "--json")
    assert result.code == 1
    assert "no query was scored" in result.err and "3 of 3" in result.err and "ingest" in result.err
    assert result.json()["error"] == "NothingScored"
    assert (tmp_path / "run" / "results.jsonl").exists()          # the run itself is kept, and says the same


def test_every_query_failing_is_an_error(registry_db: Path, cli, tmp_path: Path) -> None:
    queries = tmp_path / "q.json"
    queries.write_text(json.dumps([{"id": "q1", "query": "weather", "correct_tools": [{"id": "weather"}]}]),
                       encoding="utf-8")
    base = method_spec("full")

    def factory(settings, db_path, options, progress):
        options.engine = ScriptedEngine(lambda request: "not an answer")
        return base.factory(settings, db_path, options, progress)

    register_method(dataclasses.replace(base, name="full-broken", factory=factory), replace=True)
    try:
        result = cli("eval", "--queries", queries, "--method", "full-broken", "--out", tmp_path / "run",
                     "--no-plots")
    finally:
        unregister_method("full-broken")
    assert result.code == 1 and "ended in an error" in result.err
