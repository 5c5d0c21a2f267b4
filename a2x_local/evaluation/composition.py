"""Completeness numbers: every run split by correct-set size, and the decomposition of methods that decompose.

Queries with one correct service and queries with two or more are reported apart (hit, recall and COMP, at every
cut-off of a ranked run), since a method can trade one kind for the other. Records of a decomposing method
(compose) carry their steps; for them the summary adds steps per query, the plan's own services scored alone, and,
where the query file gives reference steps, SkillWeaver's decomposition accuracy (DA: as many steps as the reference;
DA±1: off by at most one), its category recall CatR@k (reference step i is recalled when predicted step i's top k
holds a service of the same category; steps are matched by position, so a decomposition of the wrong granularity
pays for it), and per-step hit@k (a reference step counts as found when one of its services is among the top k of
any predicted step, whatever the granularity). Categories are a tree's when the caller gives them; without one every
service is its own category, and CatR@k is the step-level recall of the reference step's own services.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from a2x_local.evaluation.metrics import RankedScore, mean, score_query

STEP_KS = (1, 5, 10)   # per-step cut-offs (a record keeps each step's top 10)
CATR_KS = (1, 10)      # SkillWeaver reports CatR@1 and CatR@10


def size_groups(scored: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Scored records with one correct service, and with two or more."""
    return {"single": [r for r in scored if len(r["scored"]) == 1],
            "multi": [r for r in scored if len(r["scored"]) >= 2]}


def _numbers(answers: Sequence[Sequence[str]], rows: Sequence[dict[str, Any]]) -> dict[str, float]:
    """hit / recall / COMP of one answer per row (the search's, or the plan's services)."""
    scores = [score_query(answer, r["scored"]) for answer, r in zip(answers, rows, strict=True)]
    return {"hit": mean([float(s.hit) for s in scores]), "recall": mean([s.recall for s in scores]),
            "comp": mean([float(s.complete) for s in scores])}


def at_cutoffs(scores: Sequence[RankedScore], cutoffs: Sequence[tuple[str, int]]) -> dict[str, dict[str, float]]:
    """hit / recall / COMP of ranked answers at every cut-off (label -> its k and numbers)."""
    return {label: {"k": cut, "hit": mean([s.hit(cut) for s in scores]),
                    "recall": mean([s.recall(cut) for s in scores]),
                    "comp": mean([s.complete(cut) for s in scores])} for label, cut in cutoffs}


def by_size(scored: Sequence[dict[str, Any]], cutoffs: Sequence[tuple[str, int]] | None) -> dict[str, Any]:
    """Per group: how many queries, the answer's hit / recall / COMP, and (ranked) the same at every cut-off."""
    groups = {}
    for name, rows in size_groups(scored).items():
        entry: dict[str, Any] = {"queries": len(rows), **_numbers([r["returned"] for r in rows], rows)}
        if cutoffs is not None:
            entry["at"] = at_cutoffs([RankedScore.of(r["ranking"], r["scored"]) for r in rows], cutoffs)
        groups[name] = entry
    return groups


def _plan_numbers(rows: Sequence[dict[str, Any]]) -> dict[str, float]:
    return {"services_per_query": mean([float(len(r["compose"]["services"])) for r in rows]),
            **_numbers([r["compose"]["services"] for r in rows], rows)}


def category_recall(rankings: Sequence[Sequence[str]], reference: Sequence[Sequence[str]], *,
                    categories: Mapping[str, frozenset[str]] | None = None,
                    ks: Sequence[int] = CATR_KS) -> dict[int, list[float]]:
    """Per cut-off, one 0/1 per reference step that names services: whether the predicted step at its position
    ranks a service of one of its categories in the top k (a missing predicted step recalls nothing)."""
    def kinds(service_id: str) -> frozenset[str]:
        return categories.get(service_id, frozenset()) if categories is not None else frozenset({service_id})

    found: dict[int, list[float]] = {k: [] for k in ks}
    for index, tools in enumerate(reference):
        wanted = frozenset().union(*(kinds(tool) for tool in tools)) if tools else frozenset()
        if not wanted:
            continue
        ranking = rankings[index] if index < len(rankings) else []
        for k in ks:
            found[k].append(float(any(kinds(service_id) & wanted for service_id in ranking[:k])))
    return found


def _reference(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    counts = [(r["compose"]["steps"], len(r["reference_steps"])) for r in rows]
    step_hits: dict[str, list[float]] = {str(k): [] for k in STEP_KS}
    recalled: dict[int, list[float]] = {k: [] for k in CATR_KS}
    for r in rows:
        rankings = r["compose"].get("step_rankings", [])
        for k, values in category_recall(rankings, r["reference_steps"]).items():
            recalled[k] += values
        for tools in r["reference_steps"]:
            if not tools:
                continue
            for k in STEP_KS:
                step_hits[str(k)].append(float(any(t in ranking[:k] for ranking in rankings for t in tools)))
    return {"queries": len(rows), "reference_steps_per_query": mean([float(g) for _, g in counts]),
            "da": mean([float(p == g) for p, g in counts]), "da_pm1": mean([float(abs(p - g) <= 1) for p, g in counts]),
            "steps_scored": len(step_hits[str(STEP_KS[0])]),
            "step_hit": {k: mean(values) for k, values in step_hits.items()},
            "catr": {str(k): mean(values) for k, values in recalled.items()}, "catr_categories": "services"}


def decomposition(scored: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The decomposition block of a summary, or None when the method does not decompose."""
    rows = [r for r in scored if isinstance(r.get("compose"), dict)]
    if not rows:
        return None
    groups = size_groups(rows)
    summary: dict[str, Any] = {
        "queries": len(rows),
        "steps_per_query": mean([float(r["compose"]["steps"]) for r in rows]),
        "multi_step_share": mean([float(r["compose"]["steps"] > 1) for r in rows]),
        "steps_per_query_by_size": {name: mean([float(r["compose"]["steps"]) for r in group])
                                    for name, group in groups.items()},
        "plan": {**_plan_numbers(rows), "by_size": {name: _plan_numbers(group) for name, group in groups.items()}},
        "sad_applied": sum(1 for r in rows if r["compose"].get("sad_applied")),
        "sad_copy_rejected": sum(int(r["compose"].get("sad_copy_rejected", 0)) for r in rows),
    }
    referenced = [r for r in rows if r.get("reference_steps")]
    if referenced:
        summary["reference"] = _reference(referenced)
    return summary
