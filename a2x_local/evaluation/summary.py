"""From per-query records to one run summary (the numbers the report, the plots and `eval compare` show)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from a2x_local.evaluation.composition import at_cutoffs, by_size, decomposition
from a2x_local.evaluation.metrics import RankedScore, f1, mean, percent_k, percentile, score_query

# The position-bias rule (docs/evaluation.md "Position bias"): over at least this many choices among two or more
# options ...
POSITION_BIAS_MIN_CHOICES = 20
# ... a model chooses by position when the share of its choices that took one position (the first, the tenth, ...)
# stands above the share a choice blind to position would give it by at least this part of the way to 1 (0: as
# blind, 1: always that position). Between what honest choices reach and what a positional model does, measured:
# the simulated oracle and reader stay at or under 0.21 (the oracle under `lean`, whose pre-ranking puts the best
# service first), SmolLM2-135M-Instruct, which answers the tenth line whatever the request, stood at 0.39 (get_all)
# and 0.49 (get_one) on the published ToolRet tree (scripts/bench_real_model.py; docs/evaluation.md).
POSITION_BIAS_EXCESS = 0.3


def _cutoffs(ks: Sequence[int], percent_ks: Sequence[float], registry_size: int) -> list[tuple[str, int]]:
    cutoffs = [(str(k), k) for k in ks]
    cutoffs += [(f"{share * 100:g}%", percent_k(share, registry_size)) for share in percent_ks]
    return cutoffs


def ranking_depth(k: int, ks: Sequence[int], percent_ks: Sequence[float], registry_size: int) -> int:
    """How many results a ranked method must return so every cut-off of the summary can be scored."""
    return max([k, *(cut for _, cut in _cutoffs(ks, percent_ks, registry_size))])


def summarize(records: Sequence[dict[str, Any]], *, ranked: bool, k: int, registry_size: int,
              ks: Sequence[int], percent_ks: Sequence[float]) -> dict[str, Any]:
    """Macro-averages over the scored queries; costs and latency over every query the method answered.

    ``comp`` (whole correct set returned) sits beside ``hit_rate`` and, per cut-off, beside ``hit`` and ``recall``;
    ``by_size`` splits the numbers by correct-set size; ``decomposition`` appears for methods that decompose.

    Records with ``skipped`` set (none of their correct services is in the registry) were never sent to the
    method; they are counted and listed, and left out of every average.
    """
    answered = [r for r in records if not r.get("skipped")]
    scored = [r for r in answered if r["scored"]]
    precision = mean([r["precision"] for r in scored])
    recall = mean([r["recall"] for r in scored])
    summary: dict[str, Any] = {
        "queries": {
            "selected": len(records),
            "answered": len(answered),
            "scored": len(scored),
            "skipped_no_correct_in_registry": [r["id"] for r in records if r.get("skipped")],
            "with_missing_tools": sum(1 for r in records if r["missing"]),
            "missing_tool_ids": sorted({tool for r in records for tool in r["missing"]}),
            "errors": sum(1 for r in answered if r.get("error")),
        },
        "k": k if ranked else None,
        "hit_rate": mean([float(r["hit"]) for r in scored]),
        "comp": mean([float(score_query(r["returned"], r["scored"]).complete) for r in scored]),
        "recall": recall,
        "precision": precision,
        "f1": f1(precision, recall),
        "returned_per_query": mean([len(r["returned"]) for r in answered]),
        "prompt_tokens_per_query": mean([r["prompt_tokens"] for r in answered]),
        "completion_tokens_per_query": mean([r["completion_tokens"] for r in answered]),
        "calls_per_query": mean([r["calls"] for r in answered]),
        "rounds_per_query": mean([r["rounds"] for r in answered]),
        "candidates_shown_per_query": mean([r["candidates_shown"] for r in answered]),
        # Model answers that filled a cap smaller than the list offered: where the method may have cut silently.
        "capped_answers": sum(r.get("capped", 0) for r in answered),
        "queries_with_capped_answers": sum(1 for r in answered if r.get("capped", 0)),
        # What held a model that decides badly in check (docs/search.md "Budgets"): descent answers that chose too
        # much of a node, requests a query's budget left unsent, answers cut off at their token budget.
        "overselected_answers": sum(r.get("overselected", 0) for r in answered),
        "queries_with_overselected_answers": sum(1 for r in answered if r.get("overselected", 0)),
        "budget_cut_requests": sum(r.get("budget_cut", 0) for r in answered),
        "queries_over_budget": sum(1 for r in answered if r.get("budget_cut", 0)),
        "truncated_answers": sum(r.get("truncated", 0) for r in answered),
        "position_bias": position_bias(answered),
        "latency_s": {
            "p50": percentile([r["latency_s"] for r in answered], 50),
            "p90": percentile([r["latency_s"] for r in answered], 90),
            "mean": mean([r["latency_s"] for r in answered]),
        },
    }
    summary["tokens_per_query"] = summary["prompt_tokens_per_query"] + summary["completion_tokens_per_query"]
    cutoffs = _cutoffs(ks, percent_ks, registry_size) if ranked else None
    if ranked:
        summary["ranked"] = _ranked(scored, cutoffs)
    summary["by_size"] = by_size(scored, cutoffs)
    decomposed = decomposition(scored)
    if decomposed is not None:
        summary["decomposition"] = decomposed
    return summary


def position_bias(records: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """How the method's model chose among the options it was shown (None for methods without a model choice).

    ``first_option_share``: the share of its choices (valid answers among two or more options, NONE aside) that
    took the first option shown; ``uniform_share``: the share a choice of as many options made blind to position
    would give. ``favoured_position``: the position (1-based) whose share stands furthest above what a blind
    choice would give it, with ``favoured_share`` and ``favoured_blind_share`` (a model may favour the tenth line
    as well as the first); ``excess``: how far the favoured position stands above blind, as a part of the way to
    always (0: as blind, 1: always that position); ``by_position``: the rule's verdict (`POSITION_BIAS_MIN_CHOICES`,
    `POSITION_BIAS_EXCESS`).
    """
    choices = sum(r.get("choices", 0) for r in records)
    if not choices:
        return None
    share = sum(r.get("first_choices", 0) for r in records) / choices
    uniform = sum(r.get("uniform_first", 0.0) for r in records) / choices
    taken: dict[str, float] = {"1": share * choices}
    blind: dict[str, float] = {"1": uniform * choices}
    for record in records:
        for key, count in (record.get("position_choices") or {}).items():
            taken[key] = taken.get(key, 0) + count if key != "1" else taken[key]
        for key, expected in (record.get("position_blind") or {}).items():
            blind[key] = blind.get(key, 0.0) + expected if key != "1" else blind[key]

    def excess_of(key: str) -> float:
        shown = blind.get(key, 0.0) / choices
        return (taken.get(key, 0) / choices - shown) / (1 - shown) if shown < 1 else 0.0

    favoured = max(taken, key=lambda key: (excess_of(key), -int(key)))
    excess = excess_of(favoured)
    return {"choices": choices, "first_option_share": share, "uniform_share": uniform,
            "favoured_position": int(favoured), "favoured_share": taken[favoured] / choices,
            "favoured_blind_share": blind.get(favoured, 0.0) / choices, "excess": excess,
            "by_position": choices >= POSITION_BIAS_MIN_CHOICES and excess >= POSITION_BIAS_EXCESS - 1e-9,
            "rule": {"min_choices": POSITION_BIAS_MIN_CHOICES, "excess": POSITION_BIAS_EXCESS}}


def _ranked(scored: Sequence[dict[str, Any]], cutoffs: Sequence[tuple[str, int]]) -> dict[str, Any]:
    # Each ranking is de-duplicated and matched once; the cut-offs only read the ranks it found.
    scores = [RankedScore.of(r["ranking"], r["scored"]) for r in scored]
    return {
        "at": at_cutoffs(scores, cutoffs),
        "mrr": mean([score.reciprocal_rank() for score in scores]),
        "ndcg@10": mean([score.ndcg(10) for score in scores]),
    }
