"""From per-query records to one run summary (the numbers the report, the plots and `eval compare` show)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from a2x_local.evaluation.composition import at_cutoffs, by_size, decomposition
from a2x_local.evaluation.metrics import RankedScore, f1, mean, percent_k, percentile, score_query


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


def _ranked(scored: Sequence[dict[str, Any]], cutoffs: Sequence[tuple[str, int]]) -> dict[str, Any]:
    # Each ranking is de-duplicated and matched once; the cut-offs only read the ranks it found.
    scores = [RankedScore.of(r["ranking"], r["scored"]) for r in scored]
    return {
        "at": at_cutoffs(scores, cutoffs),
        "mrr": mean([score.reciprocal_rank() for score in scores]),
        "ndcg@10": mean([score.ndcg(10) for score in scores]),
    }
