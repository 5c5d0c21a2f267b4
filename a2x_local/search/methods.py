"""Every search method by name, so `a2x-local search` and `a2x-local eval` run any of them the same way.

A method is a :class:`MethodSpec`: a name, an options model (pydantic, unknown options rejected), a factory that
returns a :class:`~a2x_local.search.types.SearchMethod`, and the facts callers plan by, declared rather than guessed:
whether it needs an engine (a model), which modes it takes, and what a query costs. The search stage's own methods
are listed in ``_LAZY`` by the module attribute that holds their spec, and a module is imported only when one of
its methods is asked for, so listing the methods (`--help`) loads nothing heavy. Stages above search (compose) and
plug-ins add theirs with `register_method`, from the composition root (the CLI, the server), so search never names
a higher stage.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from a2x_local.errors import UserError
from a2x_local.search.types import MODES, Retriever, SearchMethod
from a2x_local.settings import Settings, validation_problems

# progress(label, total) -> advance(n); the CLI passes a rich progress bar, library callers pass nothing.
ProgressFactory = Callable[[str, int], Callable[[int], None]]
MethodFactory = Callable[[Settings, Path, Any, "ProgressFactory | None"], SearchMethod]

# Whether a method runs a model: "required" (only with an engine), "optional" (uses one when given, runs without
# one too: compose), "none" (retrieval).
EngineNeed = Literal["none", "optional", "required"]
# What one query costs, coarsely: "retrieval" (no model; milliseconds), "llm" (a few short prompts per query),
# "llm-heavy" (one very long prompt per query: the whole catalogue). ``cost_note`` says it in words.
CostClass = Literal["retrieval", "llm", "llm-heavy"]


@dataclass(frozen=True)
class MethodSpec:
    """How to make one search method, what it accepts, and the facts callers plan by (declared, never guessed)."""

    name: str
    summary: str
    options: type[BaseModel]
    factory: MethodFactory
    engine: EngineNeed = field(kw_only=True)
    cost: CostClass = field(kw_only=True)
    cost_note: str = field(default="", kw_only=True)
    modes: tuple[str, ...] = field(default=(), kw_only=True)   # accepted SearchRequest.mode values (empty: none)
    # Whether it searches the registry's active tree (and so cannot run on a registry without one).
    tree: bool = field(default=False, kw_only=True)
    # For engine "optional": the options under which the method runs without a model and never starts one (a
    # server without --model builds it with these).
    engine_free: Mapping[str, Any] = field(default_factory=dict, kw_only=True)

    @property
    def needs_engine(self) -> bool:
        return self.engine == "required"

    @property
    def user_options(self) -> tuple[str, ...]:
        """The options a person may set (`-o KEY=VALUE`, a request's options): not the library-only ones, marked
        ``exclude`` (a ready object such as ``retriever=``, never part of the settings a run records)."""
        return tuple(name for name, info in self.options.model_fields.items() if not info.exclude)

    @property
    def takes_engine(self) -> bool:
        """Whether the method accepts a running engine (``engine=`` option)."""
        return self.engine != "none"

    def check_mode(self, mode: str | None, *, default: str | None = None, role: str = "method") -> str | None:
        """``mode`` (or ``default`` when it is None) if this method takes it; see `check_mode`."""
        return check_mode(self.name, self.modes, mode, default=default, role=role)


class ModeError(UserError):
    """A request's mode that its method does not take. One type, one code ("BadMode"), wherever it is checked:
    the CLI turns it into a usage error (exit 2) while it parses flags, the HTTP API into a 400, MCP into a tool
    error naming the code."""

    def __init__(self, message: str, *, hint: str, accepted: tuple[str, ...] = ()) -> None:
        super().__init__(message, hint=hint, code="BadMode")
        self.accepted = accepted     # the modes the method takes (none: it has no modes)


def check_mode(method: str, modes: Iterable[str], mode: str | None, *, default: str | None = None,
               role: str = "method") -> str | None:
    """The mode a request runs with: ``mode``, or ``default`` when it gives none; a mode ``method`` does not take
    (``modes``; ``role`` names the method in the message, e.g. "step method") raises `ModeError`."""
    chosen = mode if mode is not None else default
    accepted = tuple(modes)
    if chosen is None or chosen in accepted:
        return chosen
    what = f"unknown search mode '{chosen}'" if chosen not in MODES else f"mode '{chosen}' not accepted"
    if accepted:
        raise ModeError(f"{what}: {role} '{method}' accepts the modes: {', '.join(accepted)}",
                        hint=f"choose one of: {', '.join(accepted)}", accepted=accepted)
    raise ModeError(f"{what}: {role} '{method}' has no modes",
                    hint="leave out the mode, or pick a method that has modes (an LLM method such as a2x)")


# name -> "module:ATTRIBUTE" of a MethodSpec of this stage, imported on first use.
_SPECS: dict[str, MethodSpec] = {}
_LAZY: dict[str, str] = {
    "dense": "a2x_local.search.retrieval.methods:DENSE_SPEC",
    "bm25": "a2x_local.search.retrieval.methods:BM25_SPEC",
    "hybrid": "a2x_local.search.retrieval.methods:HYBRID_SPEC",
    "a2x": "a2x_local.search.llm.methods:A2X_SPEC",
    "a2x+rescue": "a2x_local.search.llm.methods:RESCUE_SPEC",
    "full": "a2x_local.search.llm.methods:FULL_SPEC",
    "select": "a2x_local.search.llm.methods:SELECT_SPEC",
}


def register_method(spec: MethodSpec, *, replace: bool = False) -> None:
    """Add a method at run time: another stage's (from the composition root), a plug-in's, a test's; a name that
    is taken needs ``replace`` (a composition root that may run twice in one process passes it)."""
    if spec.name in _SPECS and not replace:
        raise ValueError(f"search method '{spec.name}' is already registered")
    _SPECS[spec.name] = spec


def unregister_method(name: str) -> None:
    _SPECS.pop(name, None)


def method_names() -> list[str]:
    """Every method this process can make: this stage's and those registered."""
    return sorted(set(_SPECS) | set(_LAZY))


def method_spec(name: str, *, offered: Iterable[str] | None = None) -> MethodSpec:
    """The spec of a method by name; an unknown name is a user error listing ``offered`` (default: every method
    this process can make; a caller that can run fewer, a server without a model, names those)."""
    if name not in _SPECS and name in _LAZY:
        module_name, _, attribute = _LAZY[name].partition(":")
        spec = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(spec, MethodSpec):
            raise TypeError(f"{_LAZY[name]} is not a MethodSpec")
        _SPECS[name] = spec
    if name not in _SPECS:
        listed = method_names() if offered is None else list(offered)
        raise UserError(f"unknown search method '{name}'", hint=f"choose one of: {', '.join(listed)}",
                        code="UnknownMethod")
    return _SPECS[name]


def validate_options(spec: MethodSpec, options: dict[str, Any]) -> BaseModel:
    """Options as the method's typed model; unknown or malformed options name the option and the method.

    A library-only option (``retriever``: a ready object) given as text, from `-o` or a configuration file, is
    refused as not settable rather than as a value of the wrong type."""
    library_only = [key for key, value in options.items()
                    if isinstance(value, str) and key in spec.options.model_fields and key not in spec.user_options]
    if library_only:
        raise UserError(f"method '{spec.name}': {', '.join(library_only)}: not an option a run can set (a library "
                        "caller hands a ready object)", hint=f"options '{spec.name}' accepts: {_accepted(spec)}")
    try:
        typed = spec.options.model_validate(options)
    except ValidationError as exc:
        unknown = [".".join(map(str, error["loc"])) for error in exc.errors() if error["type"] == "extra_forbidden"]
        problems = [f"{name}: unknown option" for name in unknown]
        if len(unknown) < len(exc.errors()):
            try:  # the other problems, worded as every configuration error is
                spec.options.model_validate({key: v for key, v in options.items() if key not in unknown})
            except ValidationError as rest:
                problems.insert(0, validation_problems(rest, "options"))
        raise UserError(f"method '{spec.name}': {'; '.join(problems)}",
                        hint=f"options '{spec.name}' accepts: {_accepted(spec)}") from exc
    return typed


def _accepted(spec: MethodSpec) -> str:
    return ", ".join(spec.user_options) or "none"


def method_options(name: str, values: Mapping[str, Any]) -> BaseModel:
    """The method's options as its typed model, validated here once (None values mean "use the configuration"):
    what an edge (the CLI's flags, a server's engine, compose's step options) hands to `make_method` as
    ``options=``. Unknown or malformed options are a `UserError` (see `validate_options`)."""
    return validate_options(method_spec(name), {key: value for key, value in values.items() if value is not None})


def make_method(name: str, settings: Settings, db_path: Path | None = None, *,
                progress: ProgressFactory | None = None, options: BaseModel | None = None,
                **values: Any) -> SearchMethod:
    """A ready search method over the registry at ``db_path`` (default: the settings' database).

    ``options`` are the method's typed options (`method_options`), handed to its factory as they are, neither
    copied nor validated again; a library caller may give the values as keywords instead (``rrf_k=30``), validated
    here once. Retrieval indexes are built on the way when missing or stale; ``progress`` shows that to a person.
    """
    spec = method_spec(name)
    if options is None:
        options = method_options(name, values)
    elif values:
        raise TypeError(f"make_method('{name}'): give the options typed (options=) or as keywords, not both")
    elif not isinstance(options, spec.options):
        raise TypeError(f"make_method('{name}'): options are a {type(options).__name__}, not the method's "
                        f"{spec.options.__name__} (see method_options)")
    return spec.factory(settings, Path(db_path or settings.db_path), options, progress)


def make_retriever(name: str, settings: Settings, db_path: Path | None = None, **values: Any) -> Retriever:
    """A ranked retriever (dense | bm25 | hybrid): a method that also answers ``retrieve(queries, k)``."""
    method = make_method(name, settings, db_path, **values)
    if not isinstance(method, Retriever):
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
