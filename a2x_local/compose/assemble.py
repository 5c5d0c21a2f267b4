"""Composition: one service per step by similarity and compatibility, then the dependency DAG and its groups.

Steps are taken in order (a step depends only on earlier ones, so order is topological). For each, every
candidate scores SkillWeaver's Eq. 4, ``alpha * sim(step, service) + (1 - alpha) * mean compatibility`` with the
services already chosen (ALGORITHM.md §5), sim being the cosine of the step and the service in the dense model's
space (the rank mapped to (0, 1] when no dense model is at hand); the best is chosen, the rest are kept as
alternatives, and the step gets a confidence (relevance.py). Edges are the decomposition's ``depends_on`` plus
output -> input overlaps between chosen services; the parallel groups are the DAG's topological levels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from a2x_local.compose.compatibility import PUBLISHED, KeywordWeights, Profile, feeds, signals
from a2x_local.compose.coverage import lacks_action
from a2x_local.compose.relevance import Confidence, Evidence
from a2x_local.compose.types import Candidate, Edge, PlanStep, Step


@dataclass
class Retrieved:
    """What the step's search returned: ids in rank order (deeper than the candidates kept), their scores."""

    ids: list[str]
    scores: list[float | None]
    error: str | None = None
    named: list[str] = field(default_factory=list)   # services the step names (naming.py), put first in ids


@dataclass(frozen=True)
class Scoring:
    """How candidates score: Eq. 4's alpha, the compatibility signals used and their keyword weights, and how a
    step's confidence is read."""

    alpha: float = 0.5
    signals: tuple[str, ...] = PUBLISHED
    weights: KeywordWeights | None = None
    confidence: Confidence = field(default_factory=Confidence)
    neighbour_penalty: float = 0.0   # share of a candidate's likeness to another step taken off its similarity
    credit_substitutes: bool = True  # False: an earlier step's own candidates earn no compatibility with its choice


@dataclass
class Assembly:
    """The composed steps, edges and groups, and each step's ranking for a ranked answer (choice first)."""

    steps: list[PlanStep]
    edges: list[Edge]
    groups: list[list[str]]
    services: list[str]
    rankings: list[list[str]] = field(default_factory=list)


def similarity(rank: int, count: int) -> float:
    """Rank 1 of ``count`` -> 1.0, rank ``count`` -> 1/count: the similarity when no cosine is known."""
    return (count - rank + 1) / count


def _compatibility(service_id: str, chosen: Sequence[tuple[str, frozenset[str]]], profiles: Mapping[str, Profile],
                   scoring: Scoring) -> tuple[float | None, dict[str, float]]:
    """Mean compatibility with the services chosen before (each with the candidates its step kept)."""
    profile = profiles.get(service_id)
    per_signal: dict[str, list[float]] = {}
    means = []
    for earlier, kin in chosen:
        if earlier == service_id or profile is None or earlier not in profiles:
            continue  # a service is not compatible with itself: reuse is for similarity alone to justify
        if service_id in kin and not scoring.credit_substitutes:
            # A candidate the earlier step found for its own job does that job: what it shares with the earlier
            # choice is sameness (two weather services), not fit, and earns no compatibility.
            continue
        found = signals(profiles[earlier], profile, enabled=scoring.signals, weights=scoring.weights)
        if found:
            means.append(sum(found.values()) / len(found))
            for name, value in found.items():
                per_signal.setdefault(name, []).append(value)
    compat = sum(means) / len(means) if means else None
    return compat, {name: round(sum(v) / len(v), 6) for name, v in sorted(per_signal.items())}


def _candidate(service_id: str, rank: int, count: int, score: float | None, sim: float, evidence: Evidence,
               names: Mapping[str, str], chosen: Sequence[tuple[str, frozenset[str]]],
               profiles: Mapping[str, Profile], scoring: Scoring, named: bool, rival: float | None) -> Candidate:
    compat, per_signal = _compatibility(service_id, chosen, profiles, scoring)
    if rival is not None and evidence.cosine is not None:
        # The part of a service's likeness that another step of the plan explains is not this step's: "email the
        # forecast" must not take a weather service because it mentions the forecast (planner._rivals).
        sim -= scoring.neighbour_penalty * max(0.0, rival)
    alpha = scoring.alpha
    total = sim if compat is None else alpha * sim + (1 - alpha) * compat
    return Candidate(id=service_id, name=names.get(service_id, service_id), rank=rank, retrieval_score=score,
                     similarity=round(sim, 6), cosine=None if evidence.cosine is None else round(evidence.cosine, 6),
                     z=evidence.z, compatibility=None if compat is None else round(compat, 6), signals=per_signal,
                     score=round(total, 6), named=named, rival_cosine=None if rival is None else round(rival, 6))


def _neutral(scored: list[Candidate], alpha: float) -> list[Candidate]:
    """Candidates the registry says nothing about (no schema, no server, no category) score as if their
    compatibility were the mean of the step's others: missing metadata neither helps nor hurts a service."""
    known = [c.compatibility for c in scored if c.compatibility is not None]
    if not known:
        return scored
    neutral = sum(known) / len(known)
    return [c if c.compatibility is not None else
            c.model_copy(update={"score": round(alpha * c.similarity + (1 - alpha) * neutral, 6)}) for c in scored]


def _similarities(kept: Sequence[str], evidence: Sequence[Evidence], order: Sequence[str] | None) -> list[float]:
    """Eq. 4's sim per kept candidate: its cosine (the rank scale where any cosine is missing); with a re-ranked
    ``order``, the cosines sorted high to low are handed out along it, so the re-ranker decides the order and the
    scale stays the bi-encoder's."""
    count = len(kept)
    if any(e.cosine is None for e in evidence) or len(evidence) != count:
        values = [similarity(rank, count) for rank in range(1, count + 1)]
        by_id = dict(zip(kept, values, strict=True))
    else:
        by_id = {service_id: e.cosine or 0.0 for service_id, e in zip(kept, evidence, strict=True)}
    if order:
        ranked = [service_id for service_id in order if service_id in by_id]
        ranked += [service_id for service_id in kept if service_id not in ranked]
        by_id = dict(zip(ranked, sorted(by_id.values(), reverse=True), strict=True))
    return [by_id[service_id] for service_id in kept]


def _levels(steps: Sequence[Step], incoming: Mapping[str, set[str]]) -> dict[str, int]:
    level: dict[str, int] = {}
    for step in steps:  # earlier steps first, so every source's level is known
        level[step.id] = 1 + max((level[source] for source in incoming[step.id]), default=0)
    return level


def assemble(steps: Sequence[Step], queries: Sequence[str], retrieved: Sequence[Retrieved], *, candidates: int,
             names: Mapping[str, str], profiles: Mapping[str, Profile], scoring: Scoring | None = None,
             evidence: Sequence[Sequence[Evidence]] | None = None,
             orders: Sequence[Sequence[str] | None] | None = None,
             rivals: Sequence[Sequence[float | None]] | None = None) -> Assembly:
    """The plan's steps for one request: ``retrieved[i]`` is what step i's search found, ``evidence[i]`` the cosine
    and z of each of its first ``candidates`` services (None: no dense model), ``orders[i]`` a re-ranker's order,
    ``rivals[i]`` how much of each one's likeness belongs to another step (planner._rivals; None: not measured)."""
    scoring = scoring or Scoring()
    chosen: list[tuple[str, frozenset[str]]] = []
    chosen_by_step: dict[str, str] = {}
    composed: list[tuple[Step, list[Candidate], Retrieved]] = []
    for index, (step, found) in enumerate(zip(steps, retrieved, strict=True)):
        kept = list(zip(found.ids, found.scores, strict=True))[:candidates]
        ids = [service_id for service_id, _ in kept]
        proof = list(evidence[index]) if evidence is not None else [Evidence()] * len(kept)
        proof = (proof + [Evidence()] * len(kept))[:len(kept)]
        sims = _similarities(ids, proof, orders[index] if orders is not None else None)
        rival = list(rivals[index]) if rivals is not None else []
        rival = (rival + [None] * len(kept))[:len(kept)]
        scored = _neutral([_candidate(service_id, rank, len(kept), score, sim, e, names, chosen, profiles, scoring,
                                      service_id in found.named, other)
                           for rank, ((service_id, score), sim, e, other)
                           in enumerate(zip(kept, sims, proof, rival, strict=True), start=1)], scoring.alpha)
        # A service the step names is the user's choice: it goes first, Eq. 4 orders the rest (and the named).
        scored.sort(key=lambda c: (not c.named, -c.score, c.rank))
        if scored:
            chosen.append((scored[0].id, frozenset(ids)))
            chosen_by_step[step.id] = scored[0].id
        composed.append((step, scored, found))
    edges = [Edge(source=source, target=step.id, reason="depends_on") for step in steps for source in step.depends_on]
    linked = {(edge.source, edge.target) for edge in edges}
    for later_index, later in enumerate(steps):
        for earlier in steps[:later_index]:
            a, b = chosen_by_step.get(earlier.id), chosen_by_step.get(later.id)
            if a is None or b is None or a == b or (earlier.id, later.id) in linked:
                continue
            shared = feeds(profiles[a], profiles[b]) if a in profiles and b in profiles else []
            if shared:
                edges.append(Edge(source=earlier.id, target=later.id, reason="io", fields=shared))
    incoming: dict[str, set[str]] = {step.id: set() for step in steps}
    for edge in edges:
        incoming[edge.target].add(edge.source)
    level = _levels(steps, incoming)
    groups = [[step.id for step in steps if level[step.id] == value] for value in sorted(set(level.values()))]
    order = {step.id: i for i, step in enumerate(steps)}
    plan_steps, rankings = [], []
    for (step, scored, found), query in zip(composed, queries, strict=True):
        choice = scored[0] if scored else None
        # A service the step names is the user's word: the doubt left is which of the named ones.
        named = 1.0 / len(found.named) if choice is not None and choice.named else 0.0
        confidence = scoring.confidence.of(choice.z, choice.compatibility, scoring.alpha, named) if choice else None
        plan_steps.append(PlanStep(
            id=step.id, task=step.task, query=query, group=level[step.id],
            depends_on=sorted(incoming[step.id], key=order.__getitem__), inputs_from=list(step.inputs_from),
            choice=choice, alternatives=scored[1:],
            confidence=None if confidence is None else round(confidence, 4),
            low_confidence=(confidence is not None and confidence < scoring.confidence.threshold)
            or _misses_action(step, choice, profiles), error=found.error))
        head = [candidate.id for candidate in scored]
        shown = set(head)
        rankings.append(head + [service_id for service_id in found.ids if service_id not in shown])
    services = list(dict.fromkeys(chosen_by_step[step_id] for group in groups for step_id in group
                                  if step_id in chosen_by_step))
    return Assembly(plan_steps, edges, groups, services, rankings)


def _misses_action(step: Step, choice: Candidate | None, profiles: Mapping[str, Profile]) -> bool:
    """A choice the user did not name whose words never use the step's action (`coverage.lacks_action`)."""
    if choice is None or choice.named or choice.id not in profiles:
        return False
    return lacks_action(step.task, profiles[choice.id].keywords) is not None


def merged_ranking(services: Sequence[str], rankings: Sequence[Sequence[str]], depth: int,
                   shares: Sequence[float] | None = None) -> list[str]:
    """A ranked answer from a plan: the chosen services first, then the steps' rankings.

    Without ``shares`` every ranking is taken in turns (rank 1 of each step, then rank 2, ...), so each step's
    need gets its part of any cut-off. With ``shares`` (one positive weight per ranking) the places after the
    chosen services go by highest averages (D'Hondt): the next one to the ranking whose share divided by the
    places it already holds, plus one, is largest; a ranking whose next service is already listed moves on
    without using a place. A sure step then leaves its places to an unsure one.
    """
    merged = list(dict.fromkeys(services))
    seen = set(merged)
    if shares is None:
        for rank in range(max((len(r) for r in rankings), default=0)):
            for ranking in rankings:
                if rank < len(ranking) and ranking[rank] not in seen:
                    seen.add(ranking[rank])
                    merged.append(ranking[rank])
        return merged[:depth]
    if len(shares) != len(rankings) or any(share <= 0 for share in shares):
        raise ValueError("one positive share per ranking")
    cursor = [0] * len(rankings)
    held = [1] * len(rankings)
    while len(merged) < depth:
        open_lists = [index for index, ranking in enumerate(rankings) if cursor[index] < len(ranking)]
        if not open_lists:
            break
        index = max(open_lists, key=lambda i: (shares[i] / held[i], -i))
        service_id = rankings[index][cursor[index]]
        cursor[index] += 1
        if service_id not in seen:
            seen.add(service_id)
            merged.append(service_id)
            held[index] += 1
    return merged[:depth]


def confidence_shares(steps: Sequence[PlanStep], whole: bool, floor: float) -> list[float] | None:
    """Each step's share of a ranked answer's places: how unsure its choice is (1 - confidence), at least
    ``floor``; the whole request's ranking, when there is one, keeps a full share (1): it is plain search of the
    request, the fallback when the cut itself was wrong, which no step's confidence can vouch for. None (turns)
    when a step has no confidence (no dense model)."""
    if any(step.confidence is None for step in steps):
        return None
    shares = [max(floor, 1.0 - (step.confidence or 0.0)) for step in steps]
    return [*shares, 1.0] if whole and shares else shares
