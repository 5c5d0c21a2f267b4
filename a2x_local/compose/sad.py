"""Skill-aware decomposition (SAD): what the re-decomposition is shown, when it stops, and when it is refused.

After a first retrieval the model decomposer sees the names of the top retrieved services and decomposes again,
so its steps match how the registry divides work (SkillWeaver §4.4). Rounds stop when two successive hint sets
overlap by more than a Jaccard threshold, or after T rounds. Known failure: steps that merely copy hint names
("getWeatherForecast") instead of saying what to do; such a re-decomposition is refused, the earlier one kept, and
the refusal counted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from a2x_local.compose.assemble import merged_ranking
from a2x_local.compose.types import Step

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_IDENTIFIER = re.compile(r"^[\w./:-]*(?:[_./:-]|[a-z][A-Z])[\w./:-]*$")


def words(text: str) -> tuple[str, ...]:
    """Lower-case words of a text or an identifier (camelCase and snake_case split)."""
    return tuple(word for word in re.split(r"[^0-9a-z]+", _CAMEL.sub(" ", text).lower()) if word)


def is_copy(task: str, hint_names: Sequence[str]) -> bool:
    """A step that is a hint's name (in any spelling) or a bare identifier, rather than a task in words."""
    stripped = task.strip().strip(".")
    if " " not in stripped and _IDENTIFIER.match(stripped):
        return True
    mine = words(stripped)
    return bool(mine) and any(mine == words(name) for name in hint_names)


def copied_steps(steps: Sequence[Step], hint_names: Sequence[str]) -> list[str]:
    """Ids of the steps that copy a hint."""
    return [step.id for step in steps if is_copy(step.task, hint_names)]


def hint_ids(rankings: Sequence[Sequence[str]], count: int) -> list[str]:
    """The top ``count`` services over a request's steps, taken in turns (rank 1 of every step first)."""
    return merged_ranking((), rankings, count)


def hint_names(ids: Sequence[str], names: Mapping[str, str]) -> list[str]:
    """The names shown to the model, each once (two services may share a name)."""
    return list(dict.fromkeys(" ".join(names.get(service_id, service_id).split()) for service_id in ids))
