"""End to end with the tiny random model through vLLM: every decomposition answer constrained and parsed, SAD
rounds batched, per-step A2X descent batched, and `eval --method compose` complete.

The model's answers are nonsense that satisfies the schema, so these tests assert that answers validate and flow
and that costs are counted, never what the steps say.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from a2x_local.cli import run
from a2x_local.compose import open_composer
from a2x_local.settings import load_settings
from tests.search.a2x_helpers import sample_services, sample_tree, store_registry_and_tree
from tests.support.registries import SERVICES

pytestmark = pytest.mark.engine

REQUESTS = ["Get the weather forecast for Paris, then book a hotel room there.", "send an email to Bob",
            "Convert 100 dollars to euros and show me the latest news headlines about the euro."]
# A random model fills every string to its bound: a small vocabulary needs the budget counted per character.
TIGHT = {"max_steps": 3, "step_chars": 60, "budget_chars_per_token": 1.0}


def _check_shape(plan, known: set[str]) -> None:
    ids = [step.id for step in plan.steps]
    assert ids == [f"s{n}" for n in range(1, len(ids) + 1)] and 1 <= len(ids) <= TIGHT["max_steps"]
    for number, step in enumerate(plan.steps, start=1):
        assert all(int(d[1:]) < number for d in step.depends_on)
        assert step.choice is None or step.choice.id in known
    assert sorted(s for group in plan.groups for s in group) == sorted(ids)
    assert plan.decomposer.startswith("model:") and plan.calls >= 1 and plan.prompt_tokens > 0


def test_model_decomposition_and_sad_answers_all_validate(registry_db: Path, vllm_engine) -> None:
    before = vllm_engine.usage.snapshot()
    with open_composer(load_settings(db=registry_db), engine=vllm_engine, decomposer="model", step_method="bm25",
                       sad=True, **TIGHT) as composer:
        plans = composer.plan(REQUESTS, k=3)
    used = vllm_engine.usage.since(before)
    assert set(used.by_label) == {"decompose", "decompose_sad"}
    assert used.by_label["decompose"].failures == 0 and used.by_label["decompose_sad"].failures == 0
    assert used.by_label["decompose"].calls >= len(REQUESTS)
    for plan in plans:
        _check_shape(plan, {s.id for s in SERVICES})
        assert plan.sad.applied and len(plan.sad.rounds) == 1
        assert not any("decomposition failed" in note for note in plan.notes)


def test_steps_searched_by_a2x_in_one_batched_descent(db_path: Path, vllm_engine) -> None:
    store_registry_and_tree(db_path, sample_tree(), sample_services())
    before = vllm_engine.usage.snapshot()
    with open_composer(load_settings(db=db_path), engine=vllm_engine, decomposer="model", step_method="a2x",
                       sad=False, method_options={"max_children_selected": 2, "max_services_selected": 2},
                       **TIGHT) as composer:
        plans = composer.plan(REQUESTS[:2], k=2, mode="get_all")
    used = vllm_engine.usage.since(before)
    assert {"decompose"} < set(used.by_label) and all(stats.failures == 0 for stats in used.by_label.values())
    # one decomposition round, at most one descent round per tree level (depth 2) and one selection round, each
    # holding every step of both requests, plus retries
    assert used.rounds <= 1 + 2 + 1 + 2
    for plan in plans:
        _check_shape(plan, set(sample_services()))


def test_eval_method_compose_with_the_tiny_model(registry_db: Path, tiny_engine_args, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[compose]\n" + "".join(f"{key} = {value}\n" for key, value in TIGHT.items()))
    monkeypatch.setenv("A2X_CONFIG", str(config))
    queries = tmp_path / "queries.json"
    queries.write_text(json.dumps([{"id": str(n), "query": text, "correct_tools": [tool]} for n, (text, tool)
                                   in enumerate(zip(REQUESTS, ["weather", "email", "currency"], strict=True))]))
    capsys.readouterr()
    code = run(["eval", "-q", str(queries), "--method", "compose", *tiny_engine_args, "-o", "step_method=bm25",
                "--no-plots", "--out", str(tmp_path / "run"), "--db", str(registry_db), "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    summary = json.loads(captured.out)
    assert summary["queries"]["scored"] == 3 and summary["queries"]["errors"] == 0
    assert summary["calls_per_query"] >= 2 and summary["prompt_tokens_per_query"] > 0   # decompose + SAD
    assert summary["decomposition"]["sad_applied"] == 3                                 # on by default
    assert summary["spec"]["method_info"]["decomposer"].startswith("model:")
