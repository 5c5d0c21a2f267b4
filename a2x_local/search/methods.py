"""Every search method by name, so `a2x-local search` and `a2x-local eval` run any of them the same way.

A method is a :class:`MethodSpec`: a name, an options model (pydantic, unknown options rejected), and a factory
that returns a :class:`~a2x_local.search.types.SearchMethod`. Built-in methods are listed in ``_LAZY`` by the module
attribute that holds their spec, and a module is imported only when one of its methods is asked for, so listing
the methods (`--help`) loads nothing heavy; plug-ins and tests add theirs with `register_method`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from a2x_local.errors import UserError
from a2x_local.search.types import SearchMethod
from a2x_local.settings import Settings, validation_problems

# progress(label, total) -> advance(n); the CLI passes a rich progress bar, library callers pass nothing.
ProgressFactory = Callable[[str, int], Callable[[int], None]]
MethodFactory = Callable[[Settings, Path, Any, "ProgressFactory | None"], SearchMethod]


@dataclass(frozen=True)
class MethodSpec:
    """How to make one search method and what it accepts."""

    name: str
    summary: str
    options: type[BaseModel]
    factory: MethodFactory
    modes: tuple[str, ...] = ()     # LLM methods: accepted SearchRequest.mode values (empty: none)


# name -> "module:ATTRIBUTE" of a MethodSpec, imported on first use. Stages add their methods here.
_SPECS: dict[str, MethodSpec] = {}
_LAZY: dict[str, str] = {
    "dense": "a2x_local.search.retrieval.methods:DENSE_SPEC",
    "bm25": "a2x_local.search.retrieval.methods:BM25_SPEC",
    "hybrid": "a2x_local.search.retrieval.methods:HYBRID_SPEC",
    "a2x": "a2x_local.search.llm.methods:A2X_SPEC",
    "a2x+rescue": "a2x_local.search.llm.methods:RESCUE_SPEC",
    "full": "a2x_local.search.llm.methods:FULL_SPEC",
    "select": "a2x_local.search.llm.methods:SELECT_SPEC",
    "compose": "a2x_local.compose:COMPOSE_SPEC",   # another stage's method: named through its package
}


def register_method(spec: MethodSpec, *, replace: bool = False) -> None:
    """Add a method at run time (plug-ins, tests)."""
    if spec.name in _SPECS and not replace:
        raise ValueError(f"search method '{spec.name}' is already registered")
    _SPECS[spec.name] = spec


def unregister_method(name: str) -> None:
    _SPECS.pop(name, None)


def method_names() -> list[str]:
    return sorted(set(_SPECS) | set(_LAZY))


def method_spec(name: str) -> MethodSpec:
    """The spec of a method by name; an unknown name is a user error listing the known ones."""
    if name not in _SPECS and name in _LAZY:
        module_name, _, attribute = _LAZY[name].partition(":")
        spec = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(spec, MethodSpec):
            raise TypeError(f"{_LAZY[name]} is not a MethodSpec")
        _SPECS[name] = spec
    if name not in _SPECS:
        raise UserError(f"unknown search method '{name}'", hint=f"choose one of: {', '.join(method_names())}")
    return _SPECS[name]


def validate_options(spec: MethodSpec, options: dict[str, Any]) -> BaseModel:
    """Options as the method's typed model; unknown or malformed options name the option and the method."""
    try:
        return spec.options.model_validate(options)
    except ValidationError as exc:
        unknown = [".".join(map(str, error["loc"])) for error in exc.errors() if error["type"] == "extra_forbidden"]
        problems = [f"{name}: unknown option" for name in unknown]
        if len(unknown) < len(exc.errors()):
            try:  # the other problems, worded as every configuration error is
                spec.options.model_validate({key: v for key, v in options.items() if key not in unknown})
            except ValidationError as rest:
                problems.insert(0, validation_problems(rest, "options"))
        accepted = ", ".join(spec.options.model_fields) or "none"
        raise UserError(f"method '{spec.name}': {'; '.join(problems)}",
                        hint=f"options '{spec.name}' accepts: {accepted}") from exc


def make_method(name: str, settings: Settings, db_path: Path | None = None, *,
                progress: ProgressFactory | None = None, **options: Any) -> SearchMethod:
    """A ready search method over the registry at ``db_path`` (default: the settings' database).

    ``options`` are the method's own (see its options model); None values mean "use the configuration".
    Retrieval indexes are built on the way when missing or stale; ``progress`` shows that to a person.
    """
    spec = method_spec(name)
    typed = validate_options(spec, {key: value for key, value in options.items() if value is not None})
    return spec.factory(settings, Path(db_path or settings.db_path), typed, progress)


def make_retriever(name: str, settings: Settings, db_path: Path | None = None, **options: Any) -> Any:
    """A ranked retriever (dense | bm25 | hybrid): a method that also answers ``retrieve(queries, k)``."""
    method = make_method(name, settings, db_path, **options)
    if not callable(getattr(method, "retrieve", None)):
        raise UserError(f"method '{name}' is not a retriever", hint="use dense, bm25 or hybrid")
    return method


def parse_option_pairs(pairs: Iterable[str]) -> dict[str, str]:
    """``["k=v", ...]`` from repeated `-o/--option` flags; values stay strings, the options model converts them."""
    options: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise UserError(f"option '{pair}' is not KEY=VALUE", hint="for example: -o rrf_k=30")
        options[key] = value.strip()
    return options
