"""`a2x-local eval` and `eval compare` end to end on the small registry, with a real retriever."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from a2x_local.cli import run

QUERIES = [
    {"id": "q1", "query": "weather forecast for Lisbon", "correct_tools": [{"id": "weather"}]},
    {"id": "q2", "query": "convert dollars into another currency", "correct_tools": [{"id": "currency"}]},
    {"id": "q3", "query": "send an email and add a calendar event",
     "correct_tools": [{"id": "email"}, {"id": "calendar"}]},
    {"id": "q4", "query": "book a hotel room", "correct_tools": [{"id": "hotels"}, {"id": "not-in-registry"}]},
    {"id": "q5", "query": "play a song", "correct_tools": [{"id": "music-player"}]},
]


@pytest.fixture
def queries_file(tmp_path: Path) -> Path:
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(QUERIES))
    return path


def test_eval_writes_a_run_and_resumes(registry_db: Path, cli, queries_file: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    code, stdout, err = cli("eval", "--queries", str(queries_file), "--method", "bm25", "--k", "3",
                             "--out", str(out), "--json")
    assert code == 0, err
    summary = json.loads(stdout)
    assert summary["queries"]["scored"] == 4
    assert summary["queries"]["skipped_no_correct_in_registry"] == ["q5"]
    assert summary["queries"]["missing_tool_ids"] == ["music-player", "not-in-registry"]
    assert summary["hit_rate"] == pytest.approx(1.0)          # each query's words are in its service's text
    assert summary["ranked"]["at"]["1"]["hit"] == pytest.approx(1.0)
    assert summary["spec"]["method_info"]["method"] == "bm25"
    for name in ("run.json", "results.jsonl", "summary.json", "report.md", "hit_recall_vs_k.png"):
        assert (out / name).is_file(), name
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert {r["id"] for r in records} == {"q1", "q2", "q3", "q4", "q5"}
    q3 = next(r for r in records if r["id"] == "q3")
    assert len(q3["returned"]) <= 3 and set(q3) >= {"hit", "recall", "precision", "prompt_tokens",
                                                     "completion_tokens", "calls", "candidates_shown", "latency_s"}

    code, stdout, _ = cli("eval", "-q", str(queries_file), "-m", "bm25", "-k", "3",
                           "--out", str(out))
    assert code == 0
    assert "4 queries scored (5 from an earlier run)" in stdout
    assert "no correct service" in stdout

    code, _, err = cli("eval", "-q", str(queries_file), "-m", "bm25", "-k", "5", "--out", str(out))
    assert code == 1 and "other settings" in err


def test_default_run_folder_is_stable(registry_db: Path, cli, queries_file: Path, tmp_path: Path, capsys,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    args = ("eval", "--queries", str(queries_file), "--method", "bm25", "--limit", "2", "--json")
    first = json.loads(cli(*args)[1])
    assert first["queries"]["selected"] == 2
    assert Path(first["run_dir"]).parent == Path("runs")
    assert Path(first["run_dir"]).name.startswith("bench-bm25-")
    second = json.loads(cli("eval", "--queries", str(queries_file), "--method", "bm25",
                             "--json")[1])
    assert second["run_dir"] == first["run_dir"] and second["resumed_queries"] == 2


def test_compare(registry_db: Path, cli, queries_file: Path, tmp_path: Path, capsys) -> None:
    for method in ("bm25", "hybrid"):
        code, _, err = cli("eval", "-q", str(queries_file), "-m", method,
                            "--out", str(tmp_path / method), "--json")
        assert code == 0, err
    capsys.readouterr()
    code = run(["eval", "compare", str(tmp_path / "bm25"), str(tmp_path / "hybrid"), "--out", str(tmp_path / "c"),
                "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [row["run"] for row in result["runs"]] == ["bm25 @10", "hybrid @10"]
    assert sorted(Path(f).name for f in result["files"]) == ["compare.md", "hit_vs_k.png", "recall_vs_k.png",
                                                             "tokens_vs_hit.png"]
    code = run(["eval", "compare", str(tmp_path / "bm25"), str(tmp_path / "hybrid")])
    table = capsys.readouterr().out
    assert code == 0 and "hybrid" in table and "hit@10" in table
    assert run(["eval", "compare", str(tmp_path / "nothing")]) == 1
    assert result["comparable"] is True and result["warnings"] == []


def test_compare_says_when_runs_are_not_comparable(registry_db: Path, cli, queries_file: Path, tmp_path: Path,
                                                   capsys) -> None:
    """A k=5 run on part of the queries beside a k=10 run on all of them is named as no comparison (issue 33)."""
    for name, extra in (("short", ["-k", "5", "--limit", "1"]), ("long", ["-k", "10"])):
        code, _, err = cli("eval", "-q", str(queries_file), "-m", "bm25", "--out", str(tmp_path / name), *extra)
        assert code == 0, err
    capsys.readouterr()
    code = run(["eval", "compare", str(tmp_path / "short"), str(tmp_path / "long"), "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and result["comparable"] is False
    assert any("different k" in w for w in result["warnings"])
    assert any("different query sets" in w for w in result["warnings"])
    code = run(["eval", "compare", str(tmp_path / "short"), str(tmp_path / "long"), "--out", str(tmp_path / "c"),
                "--no-plots"])
    out = capsys.readouterr().out
    assert code == 0 and "not comparable" in out
    assert "Not comparable" in (tmp_path / "c" / "compare.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(("content", "needles"), [
    ('[{"id": "q1", "query": "x", "correct_tools": [{"id": "a"}]}, {"id": "q2", "correct_tools": [{"id": "a"}]}]',
     ["entry 1 (id 'q2')", "field 'query'"]),
    ('[{"id": "q1", "query": "x", "correct_tools": {"id": "a"}}]', ["entry 0 (id 'q1')", "field 'correct_tools'"]),
    ("[{", ["not valid JSON"]),
])
def test_malformed_query_file(registry_db: Path, cli, tmp_path: Path, capsys, content: str, needles: list[str]) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    code, _, err = cli("eval", "--queries", str(path), "--method", "bm25", "--out",
                        str(tmp_path / "r"))
    assert code == 1
    for needle in needles:
        assert needle in err
    assert not (tmp_path / "r").exists()                       # nothing half-written


def test_usage_and_empty_registry(registry_db: Path, cli, queries_file: Path, tmp_path: Path, home: Path,
                                  capsys) -> None:
    assert cli("eval", "--method", "bm25")[0] == 2
    assert cli("eval", "-q", str(queries_file), "--mode", "get_one")[0] == 2
    code, _, err = cli("eval", "-q", str(queries_file), "--missing-tools", "maybe")
    assert code == 1 and "missing_tools" in err
    code, _, err = cli("eval", "-q", str(queries_file), "--out",
                        str(tmp_path / "r"), "--db", tmp_path / "empty.duckdb", db=False)
    assert code == 1 and "registry is empty" in err


def test_changed_retrieval_settings_are_another_run(registry_db: Path, cli, queries_file: Path, tmp_path: Path, capsys,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    args = ("eval", "-q", str(queries_file), "-m", "bm25", "--out", str(tmp_path / "r"))
    assert cli(*args)[0] == 0
    config = tmp_path / "k1.toml"
    config.write_text("[retrieval]\nbm25_k1 = 1.2\n")
    monkeypatch.setenv("A2X_CONFIG", str(config))
    code, _, err = cli(*args)
    assert code == 1 and "method_info" in err          # BM25 parameters are part of what a run is
