"""`a2x-local index` and `a2x-local search`: the paths users take, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from a2x_local.db import connect
from a2x_local.llm import resolve_embedding_model as resolve_model
from a2x_local.registry import Registry
from a2x_local.search.retrieval.config import RetrievalConfig
from a2x_local.search.retrieval.corpus import EMBEDDING_SETTING
from a2x_local.settings import load_settings


def _setting(db: Path):
    with connect(db) as con:
        return Registry(con).get_setting(EMBEDDING_SETTING)


def test_index_builds_then_reports_current(registry_db: Path, cli, capsys) -> None:
    code, out, _ = cli("index", "--json")
    assert code == 0
    result = json.loads(out)
    assert result["services"] == 10 and result["embedding_model"] == "all-MiniLM-L6-v2"
    assert [(i["kind"], i["built"]) for i in result["indexes"]] == [("dense", True), ("bm25", True)]
    code, out, _ = cli("index")
    assert code == 0 and "current" in out and "built" not in out


def test_index_stores_the_embedding_model_per_registry(registry_db: Path, cli, capsys) -> None:
    model_dir = resolve_model("all-MiniLM-L6-v2")
    code, out, _ = cli("index", "--embedding-model", str(model_dir), "--only", "dense", "--json")
    assert code == 0, out
    assert _setting(registry_db) == str(model_dir)
    assert json.loads(out)["embedding_model"] == str(model_dir)
    code, _, err = cli("index", "--embedding-model", str(registry_db.parent / "nope"))
    assert code == 1 and "nope" in err
    assert _setting(registry_db) == str(model_dir)            # a bad model changes nothing
    assert cli("index", "--embedding-model", "default", "--only", "bm25")[0] == 0
    assert _setting(registry_db) is None


def test_search_one_query(registry_db: Path, cli, capsys) -> None:
    code, out, _ = cli("search", "weather forecast for Rome", "--method", "bm25", "-k", "2",
                        "--json")
    assert code == 0
    result = json.loads(out)
    assert result["method"] == "bm25" and len(result["hits"]) <= 2
    assert result["hits"][0] == {"rank": 1, "service_id": "weather", "name": "getWeatherForecast",
                                 "score": result["hits"][0]["score"], "path": [], "has_schema": True}
    code, out, _ = cli("search", "reserve a hotel room", "--method", "hybrid", "--k", "3")
    assert code == 0 and "hotels" in out and "bookHotel" in out


def test_search_a_query_file(registry_db: Path, cli, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    queries = tmp_path / "q.txt"
    queries.write_text("send an email to Bob\nlatest news headlines\n")
    code, out, _ = cli("search", "--queries", str(queries), "--method", "dense", "--json")
    assert code == 0
    results = json.loads(out)["results"]
    assert [r["hits"][0]["service_id"] for r in results] == ["email", "news"]
    default_k = RetrievalConfig.from_settings(load_settings(db=registry_db)).default_k
    assert all(len(r["hits"]) == default_k for r in results)    # default k from [retrieval] default_k
    # The registry holds ten services, as many as the shipped default: a smaller default_k shows it is obeyed.
    config = tmp_path / "config.toml"
    config.write_text("[retrieval]\ndefault_k = 3\n")
    monkeypatch.setenv("A2X_CONFIG", str(config))
    code, out, _ = cli("search", "--queries", str(queries), "--method", "dense", "--json")
    assert code == 0 and all(len(r["hits"]) == 3 for r in json.loads(out)["results"])


@pytest.mark.parametrize(("args", "code", "needle"), [
    (["search"], 2, "either a QUERY or --queries"),
    (["search", "x", "--queries", "q.txt"], 2, "either a QUERY or --queries"),
    (["search", "x", "--method", "bm25", "--mode", "get_all"], 2, "has no modes"),
    (["search", "x", "--method", "magic"], 1, "unknown search method 'magic'"),
    (["search", "x", "--method", "bm25", "-o", "rrf_k=3"], 1, "rrf_k: unknown option"),
    (["search", "x", "--method", "dense", "--model", "qwen"], 1, "model: unknown option"),
    (["search", "--queries", "absent.txt"], 1, "not found"),
    (["index", "--only", "faiss"], 2, "dense"),
])
def test_bad_input(registry_db: Path, cli, capsys, args: list[str], code: int, needle: str) -> None:
    got, out, err = cli(*args)
    assert got == code
    assert needle in out + err


def test_empty_registry(tmp_path: Path, home: Path, cli) -> None:
    code, out, err = cli("search", "anything", "--json", "--db", tmp_path / "empty.duckdb", db=False)
    assert code == 1 and "registry is empty" in err
    assert json.loads(out)["error"] == "UserError"
    assert cli("index", "--db", tmp_path / "empty.duckdb", db=False)[0] == 1


@pytest.mark.parametrize("method", ["bm25", "hybrid", "a2x"])
def test_an_empty_query_is_refused_before_any_work(registry_db: Path, cli, capsys, method: str) -> None:
    code, out, err = cli("search", "   ", "--method", method, "--json")
    assert code == 1 and "the query is empty" in err
    assert json.loads(out)["error"] == "EmptyQuery"
