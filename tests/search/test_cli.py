"""`a2x-local index` and `a2x-local search`: the paths users take, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from a2x_local.cli import run
from a2x_local.db import connect
from a2x_local.llm import resolve_embedding_model as resolve_model
from a2x_local.registry import Registry
from a2x_local.search.retrieval.config import retrieval_config
from a2x_local.search.retrieval.corpus import EMBEDDING_SETTING
from a2x_local.settings import load_settings


def _cli(capsys: pytest.CaptureFixture[str], db: Path, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = run([*args, "--db", str(db)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _setting(db: Path):
    with connect(db) as con:
        return Registry(con).get_setting(EMBEDDING_SETTING)


def test_index_builds_then_reports_current(db_path: Path, capsys) -> None:
    code, out, _ = _cli(capsys, db_path, "index", "--json")
    assert code == 0
    result = json.loads(out)
    assert result["services"] == 10 and result["embedding_model"] == "all-MiniLM-L6-v2"
    assert [(i["kind"], i["built"]) for i in result["indexes"]] == [("dense", True), ("bm25", True)]
    code, out, _ = _cli(capsys, db_path, "index")
    assert code == 0 and "current" in out and "built" not in out


def test_index_stores_the_embedding_model_per_registry(db_path: Path, capsys) -> None:
    model_dir = resolve_model("all-MiniLM-L6-v2")
    code, out, _ = _cli(capsys, db_path, "index", "--embedding-model", str(model_dir), "--only", "dense", "--json")
    assert code == 0, out
    assert _setting(db_path) == str(model_dir)
    assert json.loads(out)["embedding_model"] == str(model_dir)
    code, _, err = _cli(capsys, db_path, "index", "--embedding-model", str(db_path.parent / "nope"))
    assert code == 1 and "nope" in err
    assert _setting(db_path) == str(model_dir)            # a bad model changes nothing
    assert _cli(capsys, db_path, "index", "--embedding-model", "default", "--only", "bm25")[0] == 0
    assert _setting(db_path) is None


def test_search_one_query(db_path: Path, capsys) -> None:
    code, out, _ = _cli(capsys, db_path, "search", "weather forecast for Rome", "--method", "bm25", "-k", "2",
                        "--json")
    assert code == 0
    result = json.loads(out)
    assert result["method"] == "bm25" and len(result["hits"]) <= 2
    assert result["hits"][0] == {"rank": 1, "id": "weather", "name": "getWeatherForecast",
                                 "score": result["hits"][0]["score"], "path": []}
    code, out, _ = _cli(capsys, db_path, "search", "reserve a hotel room", "--method", "hybrid", "--k", "3")
    assert code == 0 and "hotels" in out and "bookHotel" in out


def test_search_a_query_file(db_path: Path, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    queries = tmp_path / "q.txt"
    queries.write_text("send an email to Bob\nlatest news headlines\n")
    code, out, _ = _cli(capsys, db_path, "search", "--queries", str(queries), "--method", "dense", "--json")
    assert code == 0
    results = json.loads(out)["results"]
    assert [r["hits"][0]["id"] for r in results] == ["email", "news"]
    default_k = retrieval_config(load_settings(db=db_path)).default_k
    assert all(len(r["hits"]) == default_k for r in results)    # default k from [retrieval] default_k
    # The registry holds ten services, as many as the shipped default: a smaller default_k shows it is obeyed.
    config = tmp_path / "config.toml"
    config.write_text("[retrieval]\ndefault_k = 3\n")
    monkeypatch.setenv("A2X_CONFIG", str(config))
    code, out, _ = _cli(capsys, db_path, "search", "--queries", str(queries), "--method", "dense", "--json")
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
def test_bad_input(db_path: Path, capsys, args: list[str], code: int, needle: str) -> None:
    got, out, err = _cli(capsys, db_path, *args)
    assert got == code
    assert needle in out + err


def test_empty_registry(tmp_path: Path, home: Path, capsys) -> None:
    code, out, err = _cli(capsys, tmp_path / "empty.duckdb", "search", "anything", "--json")
    assert code == 1 and "registry is empty" in err
    assert json.loads(out)["error"] == "UserError"
    assert _cli(capsys, tmp_path / "empty.duckdb", "index")[0] == 1


@pytest.mark.parametrize("method", ["bm25", "hybrid", "a2x"])
def test_an_empty_query_is_refused_before_any_work(db_path: Path, capsys, method: str) -> None:
    code, out, err = _cli(capsys, db_path, "search", "   ", "--method", method, "--json")
    assert code == 1 and "the query is empty" in err
    assert json.loads(out)["error"] == "EmptyQuery"
