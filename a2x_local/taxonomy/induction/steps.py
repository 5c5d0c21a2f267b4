"""The one table of the steps every level of a build runs through, in order (the published method's, with the
keyword path first for large nodes and a validation of the root's design).

Nodes of one level move through the steps in lockstep: for the first step that any node is waiting at, the builder
asks that step for the requests of every such node, sends them as one engine round, hands each answer back to the
step, and then runs the step's model-free work for the nodes still at it. Adding a step is its module (requests
and answer handling) and one entry here; a node's status names the step it waits for (`state.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass

from a2x_local.llm import Engine, Request, Result
from a2x_local.registry import Service
from a2x_local.taxonomy.config import BuildConfig
from a2x_local.taxonomy.induction import assign, design, keywords, refine
from a2x_local.taxonomy.induction.calls import Planned
from a2x_local.taxonomy.induction.state import (
    ASSIGN,
    DESIGN,
    KEYWORDS,
    REDESIGN,
    REFINE,
    VALIDATE,
    BuildState,
    NodeWork,
)


@dataclass(frozen=True)
class Level:
    """What every step of a level works with."""

    services: Mapping[str, Service]
    config: BuildConfig
    engine: Engine
    state: BuildState
    # Description design requests rendered while choosing each node's mode, reused by the design step.
    described: MutableMapping[str, Request]


@dataclass(frozen=True)
class Step:
    """One step: ``plan`` gives one round's requests for the nodes waiting at it (a list, or a generator for the
    steps whose rounds grow with the registry: they are streamed through the engine), ``apply`` takes one answer into
    its node's work, ``after`` (optional) ends the step for a node that is still at it, answered or not."""

    name: str
    plan: Callable[[Level, Sequence[NodeWork]], Iterable[Planned]]
    apply: Callable[[Level, NodeWork, Planned, Result], None]
    after: Callable[[Level, NodeWork], None] | None = None


STEPS: tuple[Step, ...] = (
    Step(KEYWORDS,
         plan=lambda at, works: keywords.keyword_requests(works, at.services, at.config, at.engine, at.state),
         apply=lambda at, work, plan, result: keywords.apply_keywords(work, plan, result, at.state),
         after=lambda at, work: at.state.vocabulary.append(keywords.merge_vocabulary(work, at.config))),
    Step(DESIGN,
         plan=lambda at, works: design.design_requests(works, at.services, at.config, at.engine, at.state,
                                                       rendered=at.described),
         apply=lambda at, work, plan, result: design.apply_design(work, result, at.config, at.state,
                                                                  is_root=plan.node == at.state.root_id)),
    Step(VALIDATE,
         plan=lambda at, works: design.validation_requests(works, at.config, at.engine, at.state),
         apply=lambda at, work, plan, result: design.apply_validation(work, result, at.state)),
    Step(REDESIGN,
         plan=lambda at, works: design.redesign_requests(works, at.config, at.engine, at.state),
         apply=lambda at, work, plan, result: design.apply_redesign(work, result, at.config, at.state)),
    Step(REFINE,
         plan=lambda at, works: refine.refine_requests(works, at.services, at.config, at.engine, at.state),
         apply=lambda at, work, plan, result: refine.apply_refine(work, result, at.config, at.state)),
    Step(ASSIGN,
         plan=lambda at, works: assign.assign_requests(works, at.services, at.config, at.engine, at.state),
         apply=lambda at, work, plan, result: assign.apply_assign(work, plan, result, at.state),
         after=lambda at, work: assign.after_pass(work, at.config)),
)
STEP_ORDER: tuple[str, ...] = tuple(step.name for step in STEPS)
