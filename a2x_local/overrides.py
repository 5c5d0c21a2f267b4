"""Per-run overrides of configured settings, declared from the configuration models themselves.

A setting is declared once, as a field of its table's model (`EngineConfig.max_model_len`, `LlmSearchConfig.group_cap`:
type and bounds; the value lives in default.toml). A per-run override of it (a method option, an engine flag) is
the same field made optional: ``None`` means "not given, the configuration applies". ``overrides_of(Model)`` hands
out those optional fields by name, so an options model lists which settings it lets a run change and nothing more;
its bounds can no longer drift from the table's (the CLI's flags are generated from the options models in turn).

    S = overrides_of(LlmSearchConfig)

    class Options(BaseModel):
        group_cap: S.group_cap = None          # int | None, with [search] group_cap's bounds
"""

from __future__ import annotations

from typing import Annotated, Any

from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel
from pydantic.types import Strict


class Overrides:
    """The fields of ``model`` as optional annotations, by attribute (a misspelt name fails at import)."""

    def __init__(self, model: type[BaseModel]) -> None:
        self._model = model

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        info = self._model.model_fields.get(name)
        if info is None:
            raise AttributeError(f"{self._model.__name__} has no setting '{name}'")
        # Strictness is the config file's rule (`true`, never "yes"); an override may arrive as text (`-o k=v`).
        kept = [meta for meta in info.metadata if not isinstance(meta, Strict)]
        optional = info.annotation | None
        return Annotated[optional, *kept] if kept else optional


def overrides_of(model: type[BaseModel]) -> Overrides:
    return Overrides(model)


def field_bounds(info: Any) -> dict[str, float]:
    """A field's numeric bounds by kind (``ge``, ``gt``, ``le``, ``lt``), from its constraints."""
    found: dict[str, float] = {}
    for meta in info.metadata:
        if isinstance(getattr(meta, "metadata", None), list):    # a Field() inside Annotated: its constraints
            found.update(field_bounds(meta))
        for kind, attribute in ((Ge, "ge"), (Gt, "gt"), (Le, "le"), (Lt, "lt")):
            if isinstance(meta, kind):
                found[attribute] = getattr(meta, attribute)
    return found
