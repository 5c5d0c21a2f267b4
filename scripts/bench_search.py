"""Benchmark: A2X search on ToolRet with a SIMULATED navigator instead of a model; prints JSON (last line).

THIS IS A SIMULATION. No language model answers: a scripted rule that knows each query's correct services makes
the search's decisions. `--policy oracle` decides perfectly; `--policy noisy --error-rate E` makes every category
or service decision drop each correct item with probability E and add one wrong item with probability E (seeded).
The hit and recall it reports measure the search's structure (modes, answer caps, multi-label placement, rescue)
under imperfect decisions, not the quality of any model. Prompt tokens are counted with the real Qwen tokenizer,
so costs are what a Qwen model would be sent.

The tree is built from the services by the scripted build (`a2x_local.testing.WordPolicy`), or imported with
`--tree PATH` (a JSON tree as `tree export` writes it, or a tree of the published A2X implementation: its folder
or taxonomy.json with class.json beside it).

Variants, each run over every query at every error rate: a2x get_all, get_important and get_one, a2x+rescue
(get_all, the hybrid top-k as one more group), and get_all with the former answer caps (5 categories, 20 services).
`-o KEY=VALUE` sets a `[search]` key for every variant. With `--policy oracle`, the default get_all run is also
checked against the cost targets: under 500 computed tokens per query (prompt minus the simulated prefix cache's
share, plus decode; prompt tokens are reported, not a target), at most depth + 1 rounds, the search's own
overhead under 5 ms per query.

Beside tokens by call type, every run reports the candidate ceiling (the share of queries whose correct services
were all among the candidates shown to selection: what a perfect selector could reach) and the computed tokens
(what an engine with automatic prefix caching computes: each prompt's tokens its cache does not serve, plus decode,
under one simulated cache (`a2x_local.testing.PrefixCache`: blocks of `--block-tokens` 16, least recently used
out at `--cache-tokens` 200,000) kept over the whole stream of queries in arrival order; the first `--warmup N`
queries fill it and are left out of the means). `--reader` adds a run with the reader navigator (all-MiniLM-L6-v2
reads the lines it is shown). The last line's JSON leads with the first variant's numbers (the `default` row's in
a frontier): prompt_tokens_per_query, computed_tokens_per_query, candidate_ceiling, oracle_hit and, with --reader,
reader_hit.
`--preset NAME` runs every variant under a `[search]` preset (published, default, lean).

`--frontier` measures the token levers instead (docs/search-design.md "Token frontier"): every setting of FRONTIER,
under the oracle and the noisy navigator at `--frontier-error-rate` (0.1), as one table of tokens against ceiling and
hit, plotted with matplotlib when `--plot PATH` is given.

Usage: .venv/bin/python scripts/bench_search.py [--policy noisy] [--error-rate 0,0.05,0.1,0.2] [--seed 0]
       [--tree PATH] [--data DIR | --services FILE --queries FILE] [--variants get_all,get_one] [-o KEY=VALUE ...]
       [--frontier [--settings "A;B"] [--plot docs/search_frontier.png]] [--reader] [--preset NAME]
       [--cache-tokens 200000] [--block-tokens 16] [--warmup 0] [--limit N] [--batch-size 64]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from a2x_local.db import connect
from a2x_local.evaluation.harness import Evaluation, EvaluationConfig, registry_info
from a2x_local.evaluation.metrics import mean, percentile
from a2x_local.evaluation.queries import Query, load_queries
from a2x_local.evaluation.runner import plan_run
from a2x_local.llm.tokens import chat_token_ids
from a2x_local.llm.types import Request, Result
from a2x_local.registry import Registry, Service
from a2x_local.registry.ingest import ingest
from a2x_local.search import make_method, parse_option_pairs
from a2x_local.search.llm.a2x import A2XSearch
from a2x_local.search.llm.baselines import FullCatalogue
from a2x_local.search.llm.config import LlmSearchConfig
from a2x_local.search.types import Hit, Retriever, SearchAnswer, SearchMethod, SearchRequest
from a2x_local.settings import load_settings
from a2x_local.taxonomy import import_tree, read_tree_file
from a2x_local.taxonomy.config import BuildConfig
from a2x_local.taxonomy.induction.runner import run_build
from a2x_local.taxonomy.types import Tree
from a2x_local.testing import (
    BLOCK_TOKENS,
    DEFAULT_CACHE_TOKENS,
    CacheMeter,
    ComputedTokens,
    FirstOption,
    PrefixCache,
    ReaderNavigator,
    ScriptedEngine,
    SelectEverything,
    SimulatedNavigator,
    WordPolicy,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "toolret"
# The cost target is what a prefix-caching engine computes, not the prompt tokens sent (the guide's rule: on a local
# engine cost is prompt minus cached prefix, plus decode). The 3,500 prompt tokens once set here was retired when
# cache-stable lists and direct selection of subtrees up to 150 made prompts longer and computation smaller
# (docs/search.md "Cost"); prompt tokens are still reported.
TARGET_COMPUTED_TOKENS = 500
TARGET_OVERHEAD_MS = 5.0
SIMULATION = ("simulation: no language model answered; a scripted navigator that knows the correct services made"
              " every decision (oracle, or with seeded errors at the given rate). Hit and recall measure the search's"
              " structure under such decisions, not a model.")
# name -> (mode, [search] overrides, rescue)
VARIANTS: dict[str, tuple[str, dict[str, Any], bool]] = {
    "get_all": ("get_all", {}, False),
    "get_important": ("get_important", {}, False),
    "get_one": ("get_one", {}, False),
    "a2x+rescue": ("get_all", {}, True),
    "get_all_capped": ("get_all", {"max_children_selected": 5, "max_services_selected": 20}, False),
}
# The token levers, each changed alone from the `published` preset, then the presets themselves: setting ->
# (mode, [search] overrides). Rows name their preset, so they do not depend on the shipped default preset;
# "default" rows are whatever the default preset is.


def lever(preset: str = "published", *, services: int | None = None, categories: int | None = None,
          **keys: Any) -> dict[str, Any]:
    """[search] overrides for one frontier row: ``preset``, compact service and category lines cut at ``services``
    / ``categories`` characters (None: as the preset has them), and any other [search] ``keys``."""
    row: dict[str, Any] = {"preset": preset, **keys}
    if services is not None:
        row |= {"service_lines": "compact", "compact_service_chars": services}
    if categories is not None:
        row |= {"category_lines": "compact", "compact_category_chars": categories}
    return row


PER_NODE = {"group_lists": "per_node"}
FRONTIER: dict[str, tuple[str, dict[str, Any]]] = {
    "published": ("get_all", lever()),
    "query first": ("get_all", lever(prompt_layout="query_first")),
    "language line always": ("get_all", lever(language_line="always")),
    "compact services 60": ("get_all", lever(services=60)),
    "compact categories 40": ("get_all", lever(categories=40)),
    "packed groups": ("get_all", lever(pack_groups=True)),
    "pre-rank 5 (10%), rest by name": ("get_all", lever(prerank_min=5, prerank_share=0.1)),
    "stable lists": ("get_all", lever(group_lists="stable")),
    "per-node lists": ("get_all", lever(**PER_NODE)),
    "per-node lists, direct selection up to 60": ("get_all", lever(**PER_NODE, direct_select_below=60)),
    "per-node lists, direct selection up to 100": ("get_all", lever(**PER_NODE, direct_select_below=100)),
    "per-node lists, other services at every node": ("get_all", lever(**PER_NODE, other_services_child="all")),
    "per-node lists, compact services 100": ("get_all", lever(**PER_NODE, services=100)),
    "per-node lists, compact services 60": ("get_all", lever(**PER_NODE, services=60)),
    "per-node lists, compact categories 60": ("get_all", lever(**PER_NODE, categories=60)),
    "default": ("get_all", lever("default")),
    "default, compact services 60": ("get_all", lever("default", services=60)),
    "lean": ("get_all", lever("lean")),
    # Issue 31: the default's levers switched back one at a time (which of them costs the reader's hit), and the
    # options shown in an order drawn per query (what it costs the prefix cache).
    "default, no direct selection": ("get_all", lever("default", direct_select_below=0)),
    "default, direct selection up to 30": ("get_all", lever("default", direct_select_below=30)),
    "default, own services an option at the root only": ("get_all", lever("default", other_services_child="root")),
    "default, own services always candidates": ("get_all", lever("default", other_services_child="none")),
    "default, stable lists": ("get_all", lever("default", group_lists="stable")),
    "default, merged lists": ("get_all", lever("default", group_lists="merged")),
    "default, shuffled options": ("get_all", lever("default", option_order="shuffled")),
    "default, own-services line with 10 examples": ("get_all", lever("default", other_services_examples=10)),
    "per-node lists, direct selection up to 150": ("get_all", lever(**PER_NODE, direct_select_below=150)),
    "per-node lists, direct selection up to 200": ("get_all", lever(**PER_NODE, direct_select_below=200)),
    "per-node lists, direct selection up to 300": ("get_all", lever(**PER_NODE, direct_select_below=300)),
    "default, direct selection up to 100": ("get_all", lever("default", direct_select_below=100)),
    "default, direct selection up to 150": ("get_all", lever("default", direct_select_below=150)),
    "default, direct selection up to 200": ("get_all", lever("default", direct_select_below=200)),
    "default, direct selection up to 300": ("get_all", lever("default", direct_select_below=300)),
    "get_one published": ("get_one", lever()),
    "get_one boundaries at overlap 0.3": ("get_one", lever(boundary_min_overlap=0.3)),
    "get_one lean": ("get_one", lever("lean")),
    "get_one default": ("get_one", lever("default")),
    "get_one default, shuffled options": ("get_one", lever("default", option_order="shuffled")),
    "get_one default, direct selection up to 150": ("get_one", lever("default", direct_select_below=150)),
}
NAVIGATORS = ("oracle", "noisy", "reader")
# Models that decide badly (`--bad`): what the guards of docs/search.md "Budgets" hold in check.
BAD = {"everything": SelectEverything, "first": FirstOption}


class TimedEngine(ScriptedEngine):
    """Keeps the seconds spent inside generate(), so the search's own overhead can be told apart, and what a
    prefix-caching engine would compute of the whole stream of rounds (``meter``: one simulated cache, by query)."""

    def __init__(self, rule, meter: CacheMeter) -> None:
        super().__init__(rule)
        self.generate_seconds = 0.0
        self.meter = meter

    def generate(self, requests: Sequence[Request]) -> list[Result]:
        started = time.perf_counter()
        results: list[Result] = []
        try:
            results = super().generate(requests)
            return results
        finally:
            if results:
                self.meter.observe(requests, results)
            # The counting is this benchmark's own work, not the search's: it is timed with the engine.
            self.generate_seconds += time.perf_counter() - started


class TimedMethod(SearchMethod):
    """The method with the seconds spent in its search_batch calls: the search alone, without the harness's files;
    keeps every answer by query, for the candidate ceiling."""

    def __init__(self, method: SearchMethod) -> None:
        self.method = method
        self.name, self.ranked = method.name, method.ranked
        self.seconds = 0.0
        self.answers: dict[str, SearchAnswer] = {}

    def search_batch(self, requests: Sequence[SearchRequest]) -> list[SearchAnswer]:
        started = time.perf_counter()
        try:
            answers = self.method.search_batch(requests)
        finally:
            self.seconds += time.perf_counter() - started
        self.answers.update((answer.query, answer) for answer in answers)
        return answers

    def describe(self) -> dict[str, Any]:
        return self.method.describe()

    def close(self) -> None:
        self.method.close()


class CachedRetriever:
    """The hybrid retrieval (rescue and pre-ranking), computed once per query for every variant and error rate."""

    def __init__(self, retriever: Retriever) -> None:
        self.retriever = retriever
        self.name = retriever.name
        self.cache: dict[tuple[str, int], list[Hit]] = {}

    def retrieve(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        todo = [q for q in dict.fromkeys(queries) if (q, k) not in self.cache]
        if todo:
            for query, hits in zip(todo, self.retriever.retrieve(todo, k), strict=True):
                self.cache[(query, k)] = hits
        return [self.cache[(q, k)] for q in queries]


def load_registry(db: Path, path: Path) -> list[Service]:
    """Ingest the services file as `a2x-local ingest` does; the services in file order."""
    with connect(db) as con:
        added = ingest(con, [path]).added
        by_id = Registry(con).get_many(added)
    return [by_id[service_id] for service_id in added]


def get_tree(db: Path, services: list[Service], path: Path | None) -> tuple[Tree, dict[str, Any]]:
    """The imported tree at ``path`` (service ids the registry lacks dropped), or the scripted build's tree."""
    if path is not None:
        tree, warnings = import_tree(read_tree_file(path), {s.id for s in services}, source=str(path),
                                     allow_missing=True)
        return tree, {"source": str(path), "warnings": warnings}
    settings = load_settings(db=db)
    started = time.perf_counter()
    outcome = run_build(settings, lambda: ScriptedEngine(WordPolicy(services)),
                        config=BuildConfig.from_settings(settings, keyword_merge="stem"), model="scripted")
    return outcome.tree, {"source": "scripted build (WordPolicy)",
                          "build_seconds": round(time.perf_counter() - started, 1)}


def summary(values: Sequence[float]) -> dict[str, float]:
    return {"mean": round(mean(values), 1), "p50": round(percentile(values, 50), 1),
            "p95": round(percentile(values, 95), 1), "max": max(values)}


def candidate_ceiling(queries: Sequence[Query], answers: dict[str, SearchAnswer], known: set[str], *,
                      every: bool = True) -> float:
    """The share of queries (with a correct service in the registry) whose correct services were all offered to
    selection in some call: the recall a perfect selector could reach after this descent. ``every`` False: at
    least one of them (the hit a perfect selector could reach; get_one's measure)."""
    covered = []
    for query in queries:
        correct = set(query.correct) & known
        if correct:
            calls = (answers[query.query].trace or {}).get("selection", [])
            offered = {s for call in calls for s in call["services"]}
            covered.append(float(correct <= offered if every else bool(correct & offered)))
    return mean(covered)


def run_variant(name: str, error_rate: float | str | None, args: argparse.Namespace, context: dict[str, Any], *,
                mode: str, config: LlmSearchConfig, overrides: dict[str, Any],
                rescue: bool = False) -> dict[str, Any]:
    """One setting over every query, scored by the evaluation harness: the simulated navigator at one error rate,
    (``error_rate`` None) the reader navigator, or (a name of `BAD`) a model that decides badly."""
    tree, services, queries = context["tree"], context["services"], context["queries"]
    if error_rate is None:
        rule: Any = context["reader"]
    elif isinstance(error_rate, str):
        rule = BAD[error_rate]()
    else:
        rule = SimulatedNavigator(tree, {q.query: set(q.correct) for q in queries}, error_rate=error_rate,
                                  seed=args.seed)
    meter = CacheMeter(chat_token_ids, PrefixCache(args.cache_tokens, args.block_tokens),
                       owner=lambda request: request.context["query"])
    engine = TimedEngine(rule, meter)
    retriever = context["retriever"]
    search = A2XSearch(tree, {s.id: s for s in services}, engine, config, rescue=retriever if rescue else None,
                       ranker=retriever)
    method = TimedMethod(search)
    evaluation_config = EvaluationConfig.defaults(batch_size=args.batch_size)
    folder = f"{len(context['runs'])}-{'reader' if error_rate is None else error_rate}"
    context["runs"].append(folder)
    plan = plan_run(method=search.name, options={"variant": name, "error_rate": error_rate, **overrides}, mode=mode,
                    k=10, queries_file=args.queries, registry=context["registry"], config=evaluation_config,
                    out=context["folder"] / folder)
    records = Evaluation(plan.out_dir, plan.spec, context["registry"], evaluation_config).run(method, queries)
    scored = [r for r in records if r["scored"]]
    prompt = [r["prompt_tokens"] for r in records]
    # Cost per query after the warm-up: the first queries fill the cache and are left out of the means.
    measured = queries[args.warmup:] or queries
    costs = [meter.by_owner.get(q.query, ComputedTokens()) for q in measured]
    computed_by_label = {label: round(cost.computed / len(measured), 1) for label, cost in
                         sorted(meter.by_label.items())}
    total = engine.usage.total()
    by_label = engine.usage.by_label
    return {
        "variant": name, "policy": "reader" if error_rate is None else error_rate if isinstance(error_rate, str)
        else "oracle" if error_rate == 0 else "noisy",
        "mode": mode, "rescue": rescue, "error_rate": error_rate, "overrides": overrides,
        "hit": round(mean([float(r["hit"]) for r in scored]), 4),
        "recall": round(mean([r["recall"] for r in scored]), 4),
        "candidate_ceiling": round(candidate_ceiling(queries, method.answers, context["known"]), 4),
        "candidate_ceiling_any": round(candidate_ceiling(queries, method.answers, context["known"], every=False), 4),
        "returned_per_query": round(mean([len(r["returned"]) for r in records]), 2),
        "candidates_shown_per_query": round(mean([r["candidates_shown"] for r in records]), 1),
        "prompt_tokens_per_query": summary(prompt),
        "computed_tokens_per_query": summary([c.computed for c in costs]),
        "computed_prompt_tokens_per_query": summary([c.prompt - c.cached for c in costs]),
        "measured_prompt_tokens_per_query": round(mean([c.prompt for c in costs]), 1),
        "completion_tokens_per_query": round(mean([r["completion_tokens"] for r in records]), 1),
        "cache": {"capacity_tokens": meter.cache.capacity_tokens, "block_tokens": meter.cache.block_tokens,
                  "warmup_queries": len(queries) - len(measured), "evicted_blocks": meter.cache.evicted},
        "calls_per_query": round(mean([r["calls"] for r in records]), 2),
        "rounds_per_query": summary([r["rounds"] for r in records]),
        "capped_answers_per_query": round(mean([r.get("capped", 0) for r in records]), 3),
        # What kept a model from running away (none of it should happen to a navigator that behaves), and how it
        # chose among the options shown: the share of its choices that took the first, against a blind choice's.
        "overselected_per_query": round(mean([r.get("overselected", 0) for r in records]), 4),
        "budget_cut_per_query": round(mean([r.get("budget_cut", 0) for r in records]), 4),
        "truncated_per_query": round(mean([r.get("truncated", 0) for r in records]), 4),
        "queries_over_budget": sum(1 for r in records if r.get("budget_cut", 0)),
        "max_calls_per_query": max((r["calls"] for r in records), default=0),
        "max_prompt_tokens_per_query": max(prompt, default=0),
        **first_option(records),
        **({"halves": halves(queries, records, meter, context["halves"],
                             context["hits"].setdefault((name, "reader" if error_rate is None else str(error_rate)),
                                                        {}))}
           if context.get("halves") else {}),
        **({"decisions": rule.decisions, "dropped": rule.dropped, "added": rule.added}
           if isinstance(rule, SimulatedNavigator) else {}),
        "prompt_tokens_by_call_type": {label: round(stats.prompt_tokens / len(queries), 1)
                                       for label, stats in sorted(by_label.items())},
        "computed_tokens_by_call_type": computed_by_label,
        "calls_by_call_type": {label: round(stats.calls / len(queries), 3)
                               for label, stats in sorted(by_label.items())},
        "accounting_matches_engine": sum(prompt) == total.prompt_tokens
        and sum(r["calls"] for r in records) == total.calls,
        "overhead_ms_per_query": round((method.seconds - engine.generate_seconds) / len(queries) * 1000, 3),
    }


def first_option(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The share of the navigator's choices (among two or more options) that took the first option shown, and
    the share a choice of as many options made blind to position would give."""
    choices = sum(r.get("choices", 0) for r in records)
    return {"choices": choices,
            "first_option_share": round(sum(r.get("first_choices", 0) for r in records) / choices, 4) if choices
            else None,
            "first_option_uniform": round(sum(r.get("uniform_first", 0.0) for r in records) / choices, 4) if choices
            else None}


def split_halves(queries: Sequence[Query], seed: int) -> dict[str, str]:
    """Query id -> "A" or "B": the queries shuffled with ``seed``, the first half A, the rest B (disjoint, fixed)."""
    ids = [q.id for q in queries]
    random.Random(seed).shuffle(ids)
    return {query_id: "A" if k < len(ids) // 2 else "B" for k, query_id in enumerate(ids)}


def halves(queries: Sequence[Query], records: Sequence[dict[str, Any]], meter: CacheMeter,
           half_of: dict[str, str], hits: dict[str, float]) -> dict[str, dict[str, float]]:
    """Hit, recall and computed tokens per query on each half of the queries (the cache ran over the whole
    stream; each half's means are over its own queries). ``hits`` receives each scored query's hit, by id, for the
    paired comparisons of `cross_validation`."""
    text = {q.id: q.query for q in queries}
    hits.update((r["id"], float(r["hit"])) for r in records if r["scored"])
    out = {}
    for half in ("A", "B"):
        scored = [r for r in records if r["scored"] and half_of.get(r["id"]) == half]
        mine = [q for q in queries if half_of.get(q.id) == half]
        out[half] = {"queries": len(scored), "hit": round(mean([float(r["hit"]) for r in scored]), 4),
                     "recall": round(mean([r["recall"] for r in scored]), 4),
                     "computed_tokens_per_query": round(mean([meter.by_owner.get(text[q.id], ComputedTokens()).computed
                                                              for q in mine]), 1)}
    return out


def paired(hits: dict[str, float], reference: dict[str, float], ids: Sequence[str]) -> tuple[float, float]:
    """The mean difference in hit between two settings over the same queries, and its standard error."""
    diffs = [hits[i] - reference[i] for i in ids if i in hits and i in reference]
    if len(diffs) < 2:
        return mean(diffs), 0.0
    centre = mean(diffs)
    variance = sum((d - centre) ** 2 for d in diffs) / (len(diffs) - 1)
    return centre, (variance / len(diffs)) ** 0.5


def cross_validation(rows: list[dict[str, Any]], hits: dict[tuple[str, str], dict[str, float]],
                     half_of: dict[str, str], reference: str = "published", points: float = 0.01) -> dict[str, Any]:
    """The default's rule chosen on each half and reported on the other, twice: as documented (the get_all
    settings whose reader hit on the choosing half is within ``points`` of ``reference``'s; of those the one with the
    fewest computed tokens there, the oracle's when it ran, else the reader's), and with one standard error to
    spare (eligible when the paired difference less its standard error is within ``points``): on half the dev
    queries one standard error of a difference in hit is about as large as the point allowed."""
    measured = [r for r in rows if r["mode"] == "get_all" and "reader_halves" in r]
    ref = next((r for r in measured if r["setting"] == reference), None)
    if ref is None:
        return {}
    out: dict[str, Any] = {}
    ids = {h: [i for i, x in half_of.items() if x == h] for h in ("A", "B")}

    def difference(r: dict[str, Any], half: str) -> tuple[float, float]:
        return paired(hits[(r["setting"], "reader")], hits[(reference, "reader")], ids[half])

    for rule, spare in (("plain", 0.0), ("one_standard_error", 1.0)):
        for choose, report in (("A", "B"), ("B", "A")):
            def tokens(r: dict[str, Any], half: str = choose) -> float:
                return (r.get("oracle_halves") or r["reader_halves"])[half]["computed_tokens_per_query"]

            eligible = [r for r in measured
                        if difference(r, choose)[0] - spare * difference(r, choose)[1] >= -points - 1e-9]
            chosen = min(eligible, key=tokens)
            there, error = difference(chosen, report)
            out.setdefault(rule, {})[f"chosen_on_{choose}"] = {
                "setting": chosen["setting"], "eligible": [r["setting"] for r in eligible],
                "computed_tokens_per_query": {"choosing": tokens(chosen), "reported": tokens(chosen, report)},
                "reader_hit": {"choosing": chosen["reader_halves"][choose]["hit"],
                               "reported": chosen["reader_halves"][report]["hit"]},
                f"{reference}_reader_hit": {"choosing": ref["reader_halves"][choose]["hit"],
                                            "reported": ref["reader_halves"][report]["hit"]},
                "points_vs_reference_where_reported": round(100 * there, 2),
                "standard_error_points_where_reported": round(100 * error, 2),
                "within_one_point_where_reported": there >= -points - 1e-9}
    return out


def halves_table(rows: list[dict[str, Any]], hits: dict[tuple[str, str], dict[str, float]],
                 half_of: dict[str, str], reference: str = "published") -> str:
    """Reader hit and computed tokens on each half, and the hit's distance from ``reference`` there (± one
    standard error of the paired difference)."""
    ref = next((r for r in rows if r["setting"] == reference and "reader_halves" in r), None)
    ids = {h: [i for i, x in half_of.items() if x == h] for h in ("A", "B")}
    lines = ["| setting | computed A · B | reader hit A % | reader hit B % | vs published A · B (points ± SE) |",
             "|---|---|---|---|---|"]
    for r in rows:
        if "reader_halves" not in r:
            continue
        h = r["reader_halves"]
        source = r.get("oracle_halves") or h
        delta = "—"
        if ref:
            parts = [paired(hits[(r["setting"], "reader")], hits[(reference, "reader")], ids[half])
                     for half in ("A", "B")]
            delta = " · ".join(f"{100 * d:+.1f} ± {100 * e:.1f}" for d, e in parts)
        lines.append(f"| {r['setting']} | {source['A']['computed_tokens_per_query']:,.0f} ·"
                     f" {source['B']['computed_tokens_per_query']:,.0f} | {100 * h['A']['hit']:.1f} |"
                     f" {100 * h['B']['hit']:.1f} | {delta} |")
    return "\n".join(lines)


def table(results: list[dict[str, Any]]) -> str:
    """The results as a Markdown table (hit · recall · prompt · computed tokens per query, one row per variant and
    a column per error rate, and one for the reader when it ran)."""
    rates: list[float | str | None] = sorted({r["error_rate"] for r in results
                                              if isinstance(r["error_rate"], float | int)})
    rates += [None] if any(r["error_rate"] is None for r in results) else []
    rates += list(dict.fromkeys(r["error_rate"] for r in results if isinstance(r["error_rate"], str)))
    heads = [f"E = {e:g}" if isinstance(e, float | int) else "reader" if e is None else e for e in rates]
    lines = ["| variant | " + " | ".join(f"{head}: hit · recall · prompt · computed tok" for head in heads) + " |",
             "|---|" + "---|" * len(rates)]
    for name in dict.fromkeys(r["variant"] for r in results):
        cells = []
        for rate in rates:
            r = next(x for x in results if x["variant"] == name and x["error_rate"] == rate)
            tokens, computed = r["prompt_tokens_per_query"]["mean"], r["computed_tokens_per_query"]["mean"]
            cells.append(f"{r['hit'] * 100:.1f} · {r['recall'] * 100:.1f} · {tokens:,.0f} · {computed:,.0f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def frontier_rows(results: list[dict[str, Any]], noisy_rate: float) -> list[dict[str, Any]]:
    """One row per setting: its oracle tokens, ceiling and hit beside its hit and recall under noise and the
    reader's hit, each where that navigator ran (the costs come from the oracle's run, else the reader's)."""
    rows = []
    for name in dict.fromkeys(r["variant"] for r in results):
        oracle = next((r for r in results if r["variant"] == name and r["error_rate"] == 0.0), None)
        noisy = next((r for r in results if r["variant"] == name and r["error_rate"] == noisy_rate), None)
        reader = next((r for r in results if r["variant"] == name and r["policy"] == "reader"), None)
        costs = oracle or reader or noisy
        assert costs is not None
        by_type = costs["prompt_tokens_by_call_type"]
        computed_by_type = costs["computed_tokens_by_call_type"]
        rows.append({"setting": name, "mode": costs["mode"], "overrides": costs["overrides"],
                     "costs_from": costs["policy"],
                     "prompt_tokens": costs["prompt_tokens_per_query"]["mean"],
                     "computed_tokens": costs["computed_tokens_per_query"]["mean"],
                     "descend_tokens": by_type.get("descend", 0.0),
                     "select_tokens": round(sum(v for k, v in by_type.items() if k != "descend"), 1),
                     "descend_computed": computed_by_type.get("descend", 0.0),
                     "select_computed": round(sum(v for k, v in computed_by_type.items() if k != "descend"), 1),
                     "calls": costs["calls_per_query"], "rounds": costs["rounds_per_query"]["mean"],
                     **({"candidate_ceiling": oracle["candidate_ceiling"], "oracle_hit": oracle["hit"],
                         **({"oracle_halves": oracle["halves"]} if "halves" in oracle else {})} if oracle else {}),
                     **({"noisy_hit": noisy["hit"], "noisy_recall": noisy["recall"],
                         "noisy_prompt_tokens": noisy["prompt_tokens_per_query"]["mean"]} if noisy else {}),
                     **({"reader_hit": reader["hit"], "reader_recall": reader["recall"],
                         "reader_reach": reader["candidate_ceiling_any"],
                         "reader_returned": reader["returned_per_query"],
                         "reader_prompt_tokens": reader["prompt_tokens_per_query"]["mean"],
                         "reader_computed_tokens": reader["computed_tokens_per_query"]["mean"],
                         **({"reader_halves": reader["halves"]} if "halves" in reader else {})} if reader else {})})
    return rows


def _cell(row: dict[str, Any], key: str, scale: float = 100.0, digits: int = 1) -> str:
    return f"{row[key] * scale:.{digits}f}" if key in row else "—"


def frontier_table(rows: list[dict[str, Any]], noisy_rate: float) -> str:
    reader = any("reader_hit" in r for r in rows)
    lines = ["| setting | prompt tok | computed | computed descend · select | calls | ceiling % | oracle hit % |"
             f" hit % at E = {noisy_rate:g} | recall % at E = {noisy_rate:g} |"
             + (" reader reach % | reader hit % | reader returned |" if reader else ""),
             "|---|---|---|---|---|---|---|---|---|" + ("---|---|---|" if reader else "")]
    for r in rows:
        lines.append(f"| {r['setting']} | {r['prompt_tokens']:,.0f} | {r['computed_tokens']:,.0f} |"
                     f" {r['descend_computed']:,.0f} · {r['select_computed']:,.0f} | {r['calls']:.2f} |"
                     f" {_cell(r, 'candidate_ceiling')} | {_cell(r, 'oracle_hit')} |"
                     f" {_cell(r, 'noisy_hit')} | {_cell(r, 'noisy_recall')} |"
                     + (f" {_cell(r, 'reader_reach')} | {_cell(r, 'reader_hit')} |"
                        f" {_cell(r, 'reader_returned', 1, 2)} |" if reader else ""))
    return "\n".join(lines)


def plot_frontier(rows: list[dict[str, Any]], noisy_rate: float, path: Path, title: str) -> None:
    """Computed tokens (what a prefix-caching engine pays) against the oracle's candidate ceiling, the noisy hit
    and (when run) the reader's hit, one numbered point per get_all setting (listed beside the panels)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows if r["mode"] == "get_all" and r["overrides"].get("prompt_layout") != "query_first"]
    panels = [("candidate_ceiling", "oracle candidate ceiling (%)"),
              ("noisy_hit", f"hit with the noisy navigator, E = {noisy_rate:g} (%)")]
    if any("reader_hit" in r for r in rows):      # rows measured without the reader are left out of its panel
        panels.append(("reader_hit", "hit with the reader navigator (%)"))
    fig, axes = plt.subplots(1, len(panels) + 1, figsize=(5 * len(panels) + 4.5, 4.8),
                             gridspec_kw={"width_ratios": [1] * len(panels) + [0.9]})
    for ax, (key, label) in zip(axes, panels, strict=False):
        for number, r in enumerate(rows, start=1):
            if key not in r:
                continue
            ax.scatter(r["computed_tokens"], r[key] * 100, color="tab:red" if r["setting"] == "default" else
                       "tab:blue", s=24)
            ax.annotate(str(number), (r["computed_tokens"], r[key] * 100), fontsize=7, xytext=(3, 3),
                        textcoords="offset points")
        ax.set_xlabel("computed tokens per query (simulated prefix cache)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[-1].axis("off")
    axes[-1].text(0, 1, "\n".join(f"{n}. {r['setting']}" for n, r in enumerate(rows, start=1)), va="top",
                  fontsize=7, family="monospace", transform=axes[-1].transAxes)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def make_reader(floor: float | None = None) -> ReaderNavigator:
    """The reader navigator with the built-in embedding model (the [retrieval] extra)."""
    from a2x_local.llm.embedding import load_embedding_model, resolve_embedding_model

    model = load_embedding_model(resolve_embedding_model("all-MiniLM-L6-v2"))
    return ReaderNavigator(lambda texts: model.encode(texts, batch_size=64, normalize_embeddings=True,
                                                      convert_to_numpy=True, show_progress_bar=False), floor=floor)


def headline(results: list[dict[str, Any]], name: str, noisy_rate: float) -> dict[str, Any]:
    """The numbers the issues ask for, of one setting: its oracle run's tokens and ceiling, its noisy hit and its
    reader hit when measured."""
    oracle = next((r for r in results if r["variant"] == name and r["error_rate"] == 0.0), None)
    if oracle is None:
        return {}
    noisy = next((r for r in results if r["variant"] == name and r["error_rate"] == noisy_rate), None)
    reader = next((r for r in results if r["variant"] == name and r["policy"] == "reader"), None)
    return {"headline_variant": name, "prompt_tokens_per_query": oracle["prompt_tokens_per_query"],
            "computed_tokens_per_query": oracle["computed_tokens_per_query"],
            "completion_tokens_per_query": oracle["completion_tokens_per_query"],
            "candidate_ceiling": oracle["candidate_ceiling"], "oracle_hit": oracle["hit"],
            **({f"hit_at_error_rate_{noisy_rate:g}": noisy["hit"]} if noisy else {}),
            **({"reader_hit": reader["hit"], "reader_recall": reader["recall"],
                "reader_returned_per_query": reader["returned_per_query"],
                "reader_computed_tokens_per_query": reader["computed_tokens_per_query"]} if reader else {})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA, help="folder with services.json and queries_dev.json")
    parser.add_argument("--services", type=Path, default=None, help="services file (default: in --data)")
    parser.add_argument("--queries", type=Path, default=None, help="queries file (default: in --data)")
    parser.add_argument("--tree", type=Path, default=None, help="an imported tree instead of the scripted build's")
    parser.add_argument("--policy", choices=("oracle", "noisy"), default="oracle")
    parser.add_argument("--error-rate", default="0,0.05,0.1,0.2",
                        help="comma-separated error rates of the noisy policy (oracle: 0 only)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"any of {', '.join(VARIANTS)}")
    parser.add_argument("-o", "--option", action="append", default=[], metavar="KEY=VALUE",
                        help="a [search] setting for every variant (repeatable)")
    parser.add_argument("--frontier", action="store_true", help="measure the token levers (FRONTIER) instead")
    parser.add_argument("--frontier-error-rate", type=float, default=0.1)
    parser.add_argument("--settings", default="", help="with --frontier: only these FRONTIER settings (';' list)")
    parser.add_argument("--plot", type=Path, default=None, help="with --frontier: draw the frontier into this PNG")
    parser.add_argument("--navigators", default="oracle,noisy",
                        help="with --frontier: which of oracle, noisy, reader run each setting (--reader adds reader)")
    parser.add_argument("--bad", default="", help="also run each variant with models that decide badly:"
                        f" {', '.join(BAD)} (comma-separated)")
    parser.add_argument("--halves", type=int, default=None, metavar="SEED",
                        help="also score each half of the queries (shuffled with SEED, split in two) and choose the"
                        " cheapest setting within one point of published on one half, reported on the other")
    parser.add_argument("--reader", action="store_true",
                        help="also run the reader navigator (all-MiniLM-L6-v2 reads the lines)")
    parser.add_argument("--reader-floor", type=float, default=None,
                        help="the reader's selections answer NONE below this similarity (compare list layouts with"
                        " one: without it the reader takes a service from every list)")
    parser.add_argument("--preset", default=None, help="a [search] preset for every variant (default, published,"
                        " lean); frontier rows that set a preset keep theirs")
    parser.add_argument("--cache-tokens", type=int, default=DEFAULT_CACHE_TOKENS,
                        help="capacity of the simulated prefix cache, in tokens")
    parser.add_argument("--block-tokens", type=int, default=BLOCK_TOKENS, help="block size of the simulated cache")
    parser.add_argument("--warmup", type=int, default=0,
                        help="queries that fill the cache first and are left out of the per-query costs")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    args.services = args.services or args.data / "services.json"
    args.queries = args.queries or args.data / "queries_dev.json"
    options = parse_option_pairs(args.option)
    if args.preset:
        options["preset"] = args.preset
    navigators: set[str] = set()
    if args.frontier:
        picked = [s.strip() for s in args.settings.split(";") if s.strip()] or list(FRONTIER)
        unknown = [s for s in picked if s not in FRONTIER]
        if unknown:
            parser.error(f"unknown settings {unknown}; choose from {list(FRONTIER)}")
        navigators = {n.strip() for n in args.navigators.split(",") if n.strip()}
        navigators |= {"reader"} if args.reader else set()
        if navigators - set(NAVIGATORS) or not navigators:
            parser.error(f"--navigators: choose from {', '.join(NAVIGATORS)}")
        rates = [rate for name, rate in (("oracle", 0.0), ("noisy", args.frontier_error_rate), ("reader", None))
                 if name in navigators]
        runs = [(name, FRONTIER[name][0], FRONTIER[name][1], False) for name in picked]
    else:
        rates = [0.0] if args.policy == "oracle" else [float(e) for e in args.error_rate.split(",")]
        rates += [None] if args.reader else []
        bad = [b.strip() for b in args.bad.split(",") if b.strip()]
        if set(bad) - set(BAD):
            parser.error(f"--bad: choose from {', '.join(BAD)}")
        rates += bad
        variants = [v.strip() for v in args.variants.split(",") if v.strip()]
        unknown = [v for v in variants if v not in VARIANTS]
        if unknown:
            parser.error(f"unknown variants {unknown}; choose from {list(VARIANTS)}")
        runs = [(name, *VARIANTS[name]) for name in variants]

    queries = load_queries(args.queries)[: args.limit]
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.duckdb"
        services = load_registry(db, args.services)
        tree, tree_info = get_tree(db, services, args.tree)
        settings = load_settings(db=db)
        configs = [LlmSearchConfig.from_settings(settings, **{**options, **overrides}) for _, _, overrides, _ in runs]
        retriever, retrieval_ms = None, None
        if any(rescue for *_, rescue in runs) or any(config.prerank_min for config in configs):
            retriever = CachedRetriever(make_method("hybrid", settings, db))
            # Retrieval is timed on its own (like the engine, it is not the search's overhead): every ranking the
            # variants ask for is computed here, before any variant's clock starts.
            started = time.perf_counter()
            texts = [q.query for q in queries]
            for k in sorted({c.prerank_depth for c in configs} | {max(c.prerank_depth, c.rescue_top_k) for c in configs}
                            | {c.rescue_top_k for c in configs}):
                retriever.retrieve(texts, k)
            retrieval_ms = round((time.perf_counter() - started) / max(1, len(queries)) * 1000, 3)
        context = {"tree": tree, "services": services, "queries": queries, "settings": settings, "options": options,
                   "retriever": retriever, "registry": registry_info(db), "folder": Path(tmp), "runs": [],
                   "known": {s.id for s in services},
                   "reader": make_reader(args.reader_floor) if None in rates else None,
                   "halves": split_halves(queries, args.halves) if args.halves is not None else None,
                   "hits": {}}
        results = [run_variant(name, rate, args, context, mode=mode, config=config, overrides=overrides, rescue=rescue)
                   for rate in rates for (name, mode, overrides, rescue), config in zip(runs, configs, strict=True)]
        config = LlmSearchConfig.from_settings(settings, **options)
        full_tokens = FullCatalogue(services, ScriptedEngine(lambda r: ""), config).prompt_tokens(queries[0].query)
    depth = tree.stats().depth
    noisy_rate = args.frontier_error_rate if args.frontier else 0.1
    first = "default" if args.frontier and "default" in [r[0] for r in runs] else runs[0][0]
    result: dict[str, Any] = {
        **headline(results, first, noisy_rate),
        "simulation": SIMULATION, "error_rates": rates,
        "policy": "+".join(n for n in NAVIGATORS if n in navigators) if args.frontier else args.policy,
        "seed": args.seed, "queries": len(queries), "batch_size": args.batch_size, "options": options,
        "reader_floor": args.reader_floor,
        "tree": {**tree.stats().to_dict(), **tree_info},
        "full_catalogue_prompt_tokens": full_tokens, "retrieval_ms_per_query": retrieval_ms, "results": results,
    }
    baseline = next((r for r in results if r["variant"] == "get_all" and r["error_rate"] == 0.0), None)
    if args.policy == "oracle" and not args.frontier and baseline is not None:
        mean_computed = baseline["computed_tokens_per_query"]["mean"]
        result["targets"] = {
            "computed_tokens_per_query_under": TARGET_COMPUTED_TOKENS, "computed_tokens_met": mean_computed
            < TARGET_COMPUTED_TOKENS, "rounds_at_most": depth + 1,
            "rounds_met": baseline["rounds_per_query"]["max"] <= depth + 1,
            "overhead_ms_under": TARGET_OVERHEAD_MS,
            "overhead_met": baseline["overhead_ms_per_query"] < TARGET_OVERHEAD_MS,
        }
    print(f"SIMULATION ({result['policy']}, seed {args.seed}): {SIMULATION}\n")
    if args.frontier:
        rows = frontier_rows(results, noisy_rate)
        result["frontier"] = rows
        print(frontier_table(rows, noisy_rate) + "\n")
        if args.halves is not None:
            result["halves_seed"] = args.halves
            result["cross_validation"] = cross_validation(rows, context["hits"], context["halves"])
            print(halves_table(rows, context["hits"], context["halves"]) + "\n")
            print(json.dumps(result["cross_validation"], indent=1) + "\n")
        if args.plot is not None:
            plot_frontier(rows, noisy_rate, args.plot, f"A2X search token frontier, {len(queries)} queries,"
                          f" tree: {Path(tree_info['source']).name} (simulated navigator)")
    else:
        print(table(results) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
