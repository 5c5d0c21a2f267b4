"""Compositional routing (SkillWeaver): decompose a request into steps, search every step, compose a plan (one
service per step, dependencies, parallel groups, alternatives), with skill-aware re-decomposition (SAD).

`open_composer(settings, ...)` gives a `Composer` whose ``plan(requests)`` returns one `Plan` per request (pydantic
models: ``plan.model_dump(mode="json")`` is the JSON of `a2x-local compose --json`). `COMPOSE_SPEC` is `compose` as a
search method, which the composition root (the CLI, the server) registers with the search stage, and
`step_method_names` the methods that may search a plan's steps. Everything else in this package is private.
"""

from a2x_local.compose.config import DECOMPOSERS
from a2x_local.compose.method import COMPOSE_SPEC
from a2x_local.compose.opening import open_composer, step_method_names
from a2x_local.compose.types import Plan

__all__ = ["COMPOSE_SPEC", "DECOMPOSERS", "Plan", "open_composer", "step_method_names"]
