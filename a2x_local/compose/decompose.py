"""The model decomposer: one constrained JSON answer per request, every request of a round in one engine call.

The answer's schema offers the step ids s1..sN as an enum (N = `max_steps`) and bounds every string and list, so a
model can neither invent an id nor run on; code then renumbers the steps in answer order and keeps only
dependencies on earlier steps (a DAG by construction). The SAD round uses the same schema with the names of the
services a first search found shown as hints.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, create_model

from a2x_local.compose.config import ComposeConfig
from a2x_local.compose.types import Step
from a2x_local.costs import AnswerCost
from a2x_local.llm import Engine, JsonConstraint, Request, as_data, clip
from a2x_local.prompts import PromptBook

DECOMPOSE, DECOMPOSE_SAD = "decompose", "decompose_hinted"
LABELS = {DECOMPOSE: "decompose", DECOMPOSE_SAD: "decompose_sad"}   # call types as counted in engine.usage
PROMPTS = PromptBook("a2x_local.compose", call_types=(DECOMPOSE, DECOMPOSE_SAD))
# Per step: the JSON keys, quotes and its own id beside the task text; each id of depends_on adds its own length.
_STEP_OVERHEAD_CHARS = 48


def prompt_hash() -> str:
    """SHA-256 over the decomposition prompts, recorded with evaluation runs: a changed prompt is a changed method."""
    return PROMPTS.hash()


@dataclass
class Decomposed:
    """A decomposition answer: the steps (None when no valid answer came), why not, and what code repaired."""

    steps: list[Step] | None
    error: str | None = None
    repairs: list[str] = field(default_factory=list)


@cache
def answer_model(max_steps: int, step_chars: int) -> type[BaseModel]:
    """``{"steps": [{"id", "task", "depends_on"}]}`` with ids from the enum s1..sN and at most N steps."""
    ids = Literal[tuple(f"s{number}" for number in range(1, max_steps + 1))]  # type: ignore[valid-type]
    task = Annotated[str, StringConstraints(min_length=1, max_length=step_chars)]
    step = create_model(f"DecomposedStep_{max_steps}_{step_chars}", __config__=ConfigDict(extra="forbid"),
                        id=(ids, ...), task=(task, ...),
                        depends_on=(list[ids], Field(max_length=max(0, max_steps - 1))))
    return create_model(f"Decomposition_{max_steps}_{step_chars}", __config__=ConfigDict(extra="forbid"),
                        steps=(list[step], Field(min_length=1, max_length=max_steps)))


def answer_budget(config: ComposeConfig) -> int:
    """Tokens a complete answer may need at the schema's bounds: every step with a full task and a full depends_on
    list (max_steps - 1 ids), so a long answer is never cut off and retried."""
    dependency_chars = len(f'"s{config.max_steps}", ')
    step_chars = config.step_chars + _STEP_OVERHEAD_CHARS + (config.max_steps - 1) * dependency_chars
    return int(config.max_steps * step_chars / config.budget_chars_per_token) + 16


def request_text(text: str, limit: int) -> str:
    """The request as it goes between the prompt's tags: defused by `as_data` (control markers removed, copies of
    the tags made harmless), cut to ``limit`` characters, its line breaks kept (a request may list its steps)."""
    text = as_data(text.strip())
    return text if len(text) <= limit else text[: max(1, limit - 1)].rstrip() + "…"


def parse_steps(answer: Any) -> Decomposed:
    """Steps renumbered s1..sK in answer order; a dependency survives only when it names an earlier step."""
    raw = [(item.id, " ".join(item.task.split()), list(item.depends_on)) for item in answer.steps]
    repairs: list[str] = []
    kept = [(given, task, depends) for given, task, depends in raw if task]
    if len(kept) < len(raw):
        repairs.append(f"dropped {len(raw) - len(kept)} empty steps")
    if not kept:
        return Decomposed(None, "the decomposition holds no step with a task")
    position: dict[str, int] = {}
    for index, (given, _, _) in enumerate(kept):
        position.setdefault(given, index)
    steps, dropped = [], 0
    for index, (_, task, depends) in enumerate(kept):
        earlier = sorted({position[d] for d in depends if d in position and position[d] < index})
        dropped += len(set(depends)) - len(earlier)
        steps.append(Step(id=f"s{index + 1}", task=task, depends_on=[f"s{p + 1}" for p in earlier]))
    if dropped:
        repairs.append(f"dropped {dropped} dependencies on unknown or later steps")
    return Decomposed(steps, repairs=repairs)


class ModelDecomposer:
    """Decomposes with the engine's model; ``label`` names it in every plan (``model:<model>``)."""

    def __init__(self, engine: Engine, config: ComposeConfig) -> None:
        self.engine = engine
        self.config = config
        self.constraint = JsonConstraint(answer_model(config.max_steps, config.step_chars))
        self.budget = answer_budget(config)

    @property
    def label(self) -> str:
        return f"model:{self.engine.describe().get('model') or self.engine.name}"

    def decompose(self, requests: Sequence[str], ledgers: Sequence[AnswerCost],
                  hints: Sequence[Sequence[str]] | None = None) -> list[Decomposed]:
        """One engine call for every request (with ``hints``: the SAD prompt, one hint list per request)."""
        call_type = DECOMPOSE if hints is None else DECOMPOSE_SAD
        outcomes: list[Decomposed | None] = [None] * len(requests)
        batch, owners = [], []
        for index, text in enumerate(requests):
            request = self._request(call_type, text, None if hints is None else hints[index])
            if request is None:
                outcomes[index] = Decomposed(None, "the request does not fit the model's context window")
                continue
            batch.append(request)
            owners.append(index)
        for index, result in zip(owners, self.engine.generate(batch), strict=True):
            # A retry is one more attempt sent, in one more sequential round.
            ledgers[index].add(AnswerCost(calls=result.attempts, prompt_tokens=result.prompt_tokens,
                                          completion_tokens=result.completion_tokens, rounds=result.attempts))
            outcomes[index] = parse_steps(result.value) if result.ok else Decomposed(None, result.error)
        return [outcome for outcome in outcomes if outcome is not None]

    def _request(self, call_type: str, text: str, hints: Sequence[str] | None) -> Request | None:
        user: dict[str, object] = {"request": request_text(text, self.config.request_chars)}
        if hints is not None:
            user["hints"] = "\n".join(f"- {clip(as_data(name), 120)}" for name in hints) or "(none)"
        messages = PROMPTS.render(call_type, system={"max_steps": self.config.max_steps}, **user)
        max_tokens = self.budget
        window = self.engine.max_model_len
        if window:
            room = window - self.engine.count_prompt_tokens(messages) - 8
            # A cut answer is invalid JSON: the budget may shrink to what the window leaves, down to one full step.
            if room < self.budget // self.config.max_steps:
                return None
            max_tokens = min(max_tokens, room)
        context = {"call": LABELS[call_type], "request": text, "hints": list(hints or []),
                   "max_steps": self.config.max_steps}
        return Request(messages=messages, constraint=self.constraint, max_tokens=max_tokens,
                       label=LABELS[call_type], temperature=self.config.temperature, seed=self.config.seed,
                       context=context)
