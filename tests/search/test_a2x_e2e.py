"""End to end with the tiny random model: `build`, then `eval` over 50 ToolRet dev queries for every LLM method.

The model's answers are nonsense that satisfies the constraints, so these tests assert that every answer flows
and validates and that costs are reported, never what was found.
"""

from __future__ import annotations

import json

import pytest

from a2x_local.cli import run
from a2x_local.db import connect
from a2x_local.evaluation.queries import load_queries
from a2x_local.registry import Registry, Service
from a2x_local.registry.ingest import ingest
from a2x_local.search.llm.baselines import FullCatalogue
from a2x_local.search.llm.config import LlmSearchConfig
from a2x_local.search.llm.selection import ContextWindowError
from a2x_local.search.types import SearchRequest
from a2x_local.taxonomy import store
from a2x_local.testing import ScriptedEngine, WordPolicy, registered_engine
from tests.support.engines import SharedEngine
from tests.support.paths import TOOLRET

pytestmark = pytest.mark.engine


QUERIES = TOOLRET / "queries_dev.json"
METHODS = ("a2x", "full", "select", "a2x+rescue")


@pytest.fixture(scope="module")
def toolret_services(tmp_path_factory) -> list[Service]:
    """Every ToolRet service as `a2x-local ingest` reads it, in file order."""
    db = tmp_path_factory.mktemp("toolret") / "all.duckdb"
    with connect(db) as con:
        added = ingest(con, [TOOLRET / "services.json"]).added
        by_id = Registry(con).get_many(added)
    return [by_id[service_id] for service_id in added]


def _registry(services: list[Service]) -> list[Service]:
    """The correct tools of the first 50 dev queries plus every 100th other service (~80 services)."""
    wanted = {tool for query in load_queries(QUERIES)[:50] for tool in query.correct}
    return [s for i, s in enumerate(services) if s.id in wanted or i % 100 == 0]


@pytest.fixture(scope="module")
def built_db(tmp_path_factory, toolret_services):
    """A registry whose tree `a2x-local build` made (with the deterministic word policy: fast, and a tree with
    real levels; the tiny random model's designs would leave a one-node tree). Searches use the real engine."""
    db = tmp_path_factory.mktemp("a2x-e2e") / "registry.duckdb"
    services = _registry(toolret_services)
    with connect(db) as con:
        Registry(con).insert(services)
    with (pytest.MonkeyPatch.context() as patch,
          registered_engine("scripted", lambda config: ScriptedEngine(WordPolicy(services)))):
        patch.setenv("A2X_HOME", str(db.parent / "home"))
        code = run(["build", "--engine", "scripted", "--model", "scripted", "--leaf-size", "15", "--max-children", "6",
                    "--max-depth", "2",
                    "--keyword-merge", "stem", "--no-cross-domain", "--db", str(db), "--json"])
    assert code == 0
    with connect(db) as con:
        tree = store.load_active_tree(con)
    assert tree.stats().depth == 2
    return db


# Bounds that keep a random model's answers short (it tends to use every position it may): the CI budget.
OPTIONS = {"a2x": ["-o", "max_children_selected=2", "-o", "max_services_selected=3"],
           "full": ["-o", "max_services_selected=3"],
           "select": ["-o", "select_top_k=10", "-o", "max_services_selected=3"],
           "a2x+rescue": ["-o", "max_children_selected=2", "-o", "max_services_selected=3", "-o", "rescue_top_k=5"]}


@pytest.mark.parametrize("method", METHODS)
def test_eval_over_50_toolret_queries_completes_with_valid_answers(built_db, tiny_engine_args, method, tmp_path,
                                                                   monkeypatch, capsys):
    monkeypatch.setenv("A2X_HOME", str(built_db.parent / "home"))
    capsys.readouterr()
    code = run(["eval", "--queries", str(QUERIES), "--limit", "50", "--method", method, *tiny_engine_args,
                "--mode", "get_all", *OPTIONS[method], "--out", str(tmp_path / "run"), "--db", str(built_db),
                "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    summary = json.loads(captured.out)
    assert summary["queries"]["selected"] == 50 and summary["queries"]["errors"] == 0
    assert summary["calls_per_query"] >= 1 and summary["prompt_tokens_per_query"] > 0
    assert summary["completion_tokens_per_query"] > 0 and summary["candidates_shown_per_query"] > 0
    with connect(built_db) as con:
        known = Registry(con).ids()
    records = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    answered = [r for r in records if not r.get("skipped")]
    assert len(records) == 50 and len(answered) == 50
    for record in answered:
        assert record["error"] is None and set(record["returned"]) <= known and len(record["returned"]) <= 6
        assert record["calls"] >= 1 and record["prompt_tokens"] > 0 and record["rounds"] >= 1
    if method.startswith("a2x"):
        # A depth-2 tree: at most two descent rounds and one selection round, plus one engine retry.
        assert max(r["rounds"] for r in answered) <= 4


def test_search_trace_with_the_real_engine(built_db, tiny_engine_args, monkeypatch, capsys):
    monkeypatch.setenv("A2X_HOME", str(built_db.parent / "home"))
    capsys.readouterr()
    # The registry (~80 services) is smaller than direct selection's threshold: off, so the descent is traced.
    code = run(["search", "weather forecast for Beijing", "--method", "a2x", "--mode", "get_one", *tiny_engine_args,
                "-o", "direct_select_below=0", "--db", str(built_db), "--json"])
    out = capsys.readouterr().out
    assert code == 0
    answer = json.loads(out)
    assert len(answer["hits"]) <= 1 and answer["calls"] >= 2
    decisions = answer["trace"]["decisions"]
    assert decisions[0]["node"] == "root" and decisions[0]["selected"]
    for decision in decisions:
        assert set(decision["selected"]).isdisjoint(decision["pruned"]) and decision["error"] is None


def test_compare_presets_runs_each_preset_on_the_same_queries_and_counts_what_the_engine_computed(
        built_db, tiny_engine_args, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("A2X_HOME", str(built_db.parent / "home"))
    capsys.readouterr()
    code = run(["eval", "compare-presets", *tiny_engine_args, "--queries", str(QUERIES), "--limit", "12",
                "--mode", "get_all", "--out", str(tmp_path / "presets"), "--db", str(built_db), "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    report = json.loads(captured.out)
    rows = report["presets"]
    assert [row["preset"] for row in rows] == ["published", "default", "lean"]
    for row in rows:
        assert row["errors"] == 0 and row["scored"] > 0 and 0 <= row["hit"] <= 1 and 0 <= row["recall"] <= 1
        assert row["prompt_tokens_per_query"] > 0 and row["calls_per_query"] >= 1 and row["cold_cache"]
        # What the engine computed: the prompt less what vLLM's prefix cache served, plus decode.
        assert 0 < row["cached_prompt_tokens_per_query"] < row["prompt_tokens_per_query"]
        assert row["computed_tokens_per_query"] == pytest.approx(
            row["prompt_tokens_per_query"] - row["cached_prompt_tokens_per_query"]
            + row["completion_tokens_per_query"])
        run_dir = tmp_path / "presets" / row["preset"]
        assert row["run_dir"] == str(run_dir) and len((run_dir / "results.jsonl").read_text().splitlines()) == 12
        assert json.loads((run_dir / "run.json").read_text())["spec"]["options"]["preset"] == row["preset"]
    # The table for people names every preset.
    code = run(["eval", "compare-presets", *tiny_engine_args, "--queries", str(QUERIES), "--limit", "2",
                "--presets", "lean,published", "--out", str(tmp_path / "two"), "--db", str(built_db)])
    out = capsys.readouterr().out
    assert code == 0 and "lean" in out and "published" in out and "computed" in out


def test_a_catalogue_beyond_the_context_window_is_reported(vllm_engine, toolret_services):
    services = toolret_services
    method = FullCatalogue(services, SharedEngine(vllm_engine), LlmSearchConfig.defaults())
    with pytest.raises(ContextWindowError, match=f"{len(services):,} services need"):
        method.search_batch([SearchRequest("weather in Paris")])
