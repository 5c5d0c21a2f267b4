"""Plain data types of compositional routing: what a plan is, as the CLI prints it and a server returns it.

Every type is a pydantic model, so ``plan.model_dump(mode="json")`` is exactly the JSON of `a2x-local compose
--json` (one plan per request) and a web framework can use the models as response types as they are.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from a2x_local.costs import AnswerCost


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Step(_Data):
    """One atomic sub-task that needs exactly one service. Ids (s1, s2, ...) come from code, in order; a step
    depends only on earlier steps."""

    id: str
    task: str
    depends_on: list[str] = Field(default_factory=list)
    inputs_from: list[str] = Field(default_factory=list, description="earlier steps whose output this step takes "
                                   "(it refers back: \"email it\", \"translate them\"); each is in depends_on too")


class Candidate(_Data):
    """A service retrieved for a step, and how it scored there (SkillWeaver Eq. 4).

    ``similarity`` is Eq. 4's sim: the ``cosine`` of the step and the service in the dense model's space (the
    retrieval rank mapped to (0, 1] when there is no dense model; a re-ranker's order hands the cosines out in its
    own order); ``z`` says how many standard deviations the cosine stands above what the registry's other services
    score for this step; ``compatibility`` is the mean compatibility with the services chosen for earlier steps
    (None when there are none, or the registry holds nothing to compare), ``signals`` its parts; ``score`` = alpha *
    similarity + (1 - alpha) * compatibility. A candidate without a compatibility scores with the mean of its
    step's others (missing metadata neither helps nor hurts), and when no candidate of the step has one, ``score``
    is the similarity alone. ``named``: the step names the service (it is chosen ahead of higher scores);
    ``rival_cosine``: how much of its likeness belongs to another step (the neighbour penalty's measure).
    """

    id: str
    name: str
    rank: int
    retrieval_score: float | None = None
    similarity: float
    cosine: float | None = None
    z: float | None = None
    compatibility: float | None = None
    signals: dict[str, float] = Field(default_factory=dict)
    score: float
    rival_cosine: float | None = Field(None, description="how much of this service's likeness belongs to another step "
                                       "of the plan (that step's cosine with this step times its cosine with the "
                                       "service, the largest over the other steps); similarity loses [compose] "
                                       "neighbour_penalty times it")
    named: bool = Field(False, description="the step names this service (\"post it to Slack\"): it is chosen "
                        "ahead of services that only score higher")


class PlanStep(_Data):
    """A step of a plan: its task, what was searched, the service chosen and the alternatives kept."""

    id: str
    task: str
    query: str = Field(description="the text searched: the task, or the whole request for a one-step plan")
    depends_on: list[str] = Field(default_factory=list, description="earlier steps it needs (edges into it)")
    inputs_from: list[str] = Field(default_factory=list, description="earlier steps whose output it takes as its "
                                   "input (it refers back to them: \"email it to my team\")")
    group: int = Field(description="parallel group (topological level, from 1): steps of a group can run together")
    choice: Candidate | None = None
    alternatives: list[Candidate] = Field(default_factory=list)
    confidence: float | None = Field(None, description="how sure the choice is, 0 to 1, from its retrieval standing "
                                     "and its compatibility with the plan (None: no dense model to measure it)")
    low_confidence: bool = Field(False, description="confidence under [compose] low_confidence, or a choice whose "
                                 "words never use the step's action: the runner-up (the first alternative) may be "
                                 "the better service; ask the user")
    error: str | None = None


class Edge(_Data):
    """A dependency: ``target`` needs ``source`` first. ``reason``: the decomposition said so (depends_on), or an
    output of the source's service feeds an input of the target's (io, with the shared ``fields``)."""

    source: str
    target: str
    reason: Literal["depends_on", "io"]
    fields: list[str] = Field(default_factory=list)


class SadRound(_Data):
    """One skill-aware re-decomposition: the service names shown, the steps it gave, and whether they were kept."""

    round: int
    hints: list[str]
    steps: list[Step]
    kept: bool
    jaccard: float | None = Field(None, description="overlap of this round's hint set with the previous one")
    reason: str = ""


class SadReport(_Data):
    """What skill-aware decomposition did for one request (``applied`` False: it did not run, ``reason`` says why).
    ``copy_rejected`` counts re-decompositions refused because their steps were copies of hint names."""

    applied: bool
    reason: str = ""
    first_steps: list[Step] = Field(default_factory=list)
    rounds: list[SadRound] = Field(default_factory=list)
    copy_rejected: int = 0


class Plan(_Data, AnswerCost):
    """The plan for one request: steps with their services, dependency edges and parallel groups, and its cost (the
    `AnswerCost` fields: this request's share of the model calls and tokens, and the engine rounds it waited for).

    ``services`` lists the chosen service ids in execution order (group by group). ``decomposer`` names who split
    the request: ``model:<label>``, ``rule`` or ``file:<name>``. ``notes`` say what was repaired or fell back (a
    decomposition that never validated, so the request was searched as one step; a stale tree); ``error`` is set
    only when no step could be searched.
    """

    request: str
    decomposer: str
    method: str
    steps: list[PlanStep]
    edges: list[Edge] = Field(default_factory=list)
    groups: list[list[str]] = Field(default_factory=list)
    services: list[str] = Field(default_factory=list)
    sad: SadReport
    seconds: float = 0.0
    notes: list[str] = Field(default_factory=list)
    error: str | None = None
