"""The flags every command shares and what they resolve to: `--db` and `--json`, the settings, the registry
database, option bundles declared once, and the engine a command starts when it first needs one.

An option bundle is a set of flags declared here once and added to any command by a decorator; the command receives
them as one value (`EngineOptions`, `MethodChoice`), so no command lists them again or passes them on by name.
Short flags have one meaning everywhere: -m --method, -k --k, -q --queries, -f --format, -o --option, -d --depth.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

import duckdb
import typer
from pydantic import BaseModel, Field, TypeAdapter, ValidationError
from rich.markup import escape

from a2x_local.config_check import check_config
from a2x_local.db import Mode, connect
from a2x_local.evaluation import load_query_texts
from a2x_local.llm import (
    EngineOptions,
    load_aliases,
    make_engine,
    with_answer_cache,
)
from a2x_local.locks import RegistryLock
from a2x_local.overrides import field_bounds
from a2x_local.search import (
    MODES,
    MethodFlags,
    ModeError,
    check_queries,
    method_names,
    method_options,
    method_spec,
    parse_option_pairs,
)
from a2x_local.settings import Settings, db_option, load_settings

DbOption = Annotated[
    Path | None,
    typer.Option("--db", help="Registry database file (default: $A2X_DB, else $A2X_HOME/registry.duckdb).",
                 show_default=False, parser=db_option, metavar="PATH"),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of tables.")]


def settings_for(ctx: typer.Context | None, db: Path | None = None) -> Settings:
    """Settings with the command's `--db`, else the global `--db`, else environment and config files.

    The whole configuration is checked here, whichever part the command reads: a misspelt table or key in any
    file fails every command that loads settings, not only the one command that reads that table."""
    global_db = None
    if ctx is not None:
        root = ctx.find_root()
        global_db = (root.obj or {}).get("db") if isinstance(root.obj, dict) else None
    settings = load_settings(db=db or global_db)
    check_config(settings)   # every stage's table: the CLI has imported each stage
    load_aliases(settings)   # the [models."NAME"] tables' values
    return settings


@contextmanager
def open_registry_db(settings: Settings, *, mode: Mode = "write",
                     job: str = "a command") -> Iterator[duckdb.DuckDBPyConnection]:
    """The registry database, opened (and migrated) for the length of a block; ``mode="read"`` for commands that
    only read, so a read-only file still serves them. Commands that write check every block first, and hold the
    registry write lock (`RegistryLock`, named by ``job``) for the block: a second writer waits, then is refused."""
    with ExitStack() as stack:
        if mode == "write":
            stack.enter_context(RegistryLock(settings.db_path, job, wait_s=settings.lock_timeout_s))
        con = stack.enter_context(connect(settings.db_path, lock_timeout_s=settings.lock_timeout_s, mode=mode,
                                          verify=mode == "write"))
        yield con


def engine_loader(settings: Settings, options: EngineOptions, no_cache: bool) -> Callable[[], Any]:
    """What starts the command's engine when the job first needs it, behind the answer cache (`--no-cache`: the
    cache is written, not read)."""

    def load() -> Any:
        return with_answer_cache(make_engine(settings, options), settings, read=not no_cache)

    return load


def model_label(settings: Settings, options: EngineOptions) -> str:
    """The model a job records: `--model`, else `model` in [engine]."""
    return options.model or str(settings.section("engine")["model"])


def query_texts(text: str | None, queries: Path | None, argument: str) -> list[str]:
    """The texts a command runs: its one ARGUMENT text (checked), or every query of its `--queries` file."""
    if (text is None) == (queries is None):
        raise typer.BadParameter(f"give either a {argument} or --queries FILE (not both)", param_hint=argument)
    if text is not None:
        check_queries([text])
        return [text.strip()]
    return load_query_texts(queries)


def option_bundle(target: str, flags: dict[str, Any], build: Callable[..., Any], *,
                  exclude: tuple[str, ...] = ()) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator adding ``flags`` (name -> Annotated type, each defaulting to None) to a command; the command gets
    ``build(**values)`` as its parameter ``target`` instead. Typer reads the command's signature, so the wrapper
    presents the original parameters plus the flags, with their annotations already evaluated."""
    chosen = {name: annotation for name, annotation in flags.items() if name not in exclude}

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(command, eval_str=True)
        kept = [p for p in signature.parameters.values() if p.name != target]
        added = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation)
                 for name, annotation in chosen.items()]

        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            values = {name: kwargs.pop(name, None) for name in chosen}
            kwargs[target] = build(**values)
            return command(*args, **kwargs)

        parameters = sorted(kept, key=lambda p: p.kind == inspect.Parameter.KEYWORD_ONLY) + added
        wrapper.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
        return wrapper

    return decorate


def _scalar(annotation: Any) -> type:
    """The plain type a flag parses (int, float, str, bool): a field's type without None; a choice (Literal) is
    text, checked by the options model with a message that lists the choices."""
    kinds = [kind for kind in get_args(annotation) or (annotation,) if kind is not type(None)]
    for kind in (bool, int, float, str):
        if kind in kinds:
            return kind
    return str


def _exclusive_range(info: Any, bounds: dict[str, float]) -> Callable[[str], Any]:
    """A parser for a number with an open bound (typer's `min`/`max` are closed), so `--flag 0` of a field that
    must be above 0 is a usage error naming the flag, as any other out-of-range value is."""
    adapter = TypeAdapter(Annotated[_scalar(info.annotation), Field(**bounds)])

    def parse(value: str) -> Any:
        try:
            return adapter.validate_python(value)
        except ValidationError as exc:
            raise typer.BadParameter(exc.errors()[0]["msg"]) from None

    parse.bounds = dict(bounds)  # type: ignore[attr-defined]  # what a check of every flag's range reads
    return parse


def range_label(bounds: dict[str, float]) -> str:
    """``bounds`` in words (`above 0 to 1`), as docs/cli.md writes a range, for a flag whose bound is open."""
    low = f"above {bounds['gt']:g}" if "gt" in bounds else f"{bounds['ge']:g}" if "ge" in bounds else ""
    high = f"below {bounds['lt']:g}" if "lt" in bounds else f"{bounds['le']:g}" if "le" in bounds else ""
    return f"{low} to {high}" if low and high else f"at least {low}" if low else f"at most {high}"


def setting_flag(info: Any, *decls: str, help: str, metavar: str | None = None, **option: Any) -> Any:
    """A flag that overrides one setting (``info``: its model field): the flag's type, choices and range are the
    field's, so they cannot drift from the table; ``help`` and the other typer settings are the command's. A closed
    bound is typer's range; an open one (above 0) a parser, so both are usage errors naming the flag."""
    annotation = info.annotation
    kinds = (annotation,) if get_origin(annotation) is Literal else get_args(annotation)
    choices = [arg for kind in kinds if get_origin(kind) is Literal for arg in get_args(kind)]
    metavar = metavar or ("|".join(map(str, choices)) if choices else None)
    bounds = field_bounds(info)
    kind = _scalar(info.annotation)
    if "gt" in bounds or "lt" in bounds:
        option["parser"] = _exclusive_range(info, bounds)
        help += f" Range: {range_label(bounds)}."
        metavar = metavar or kind.__name__
    else:
        option.update(min=bounds.get("ge"), max=bounds.get("le"))
    return Annotated[kind | None, typer.Option(*decls, metavar=metavar, help=help, **option)]


def config_flag(model: type[BaseModel], key: str, *decls: str, help: str, **option: Any) -> Any:
    """`setting_flag` for the key ``key`` of a table's model (`BuildConfig`, "max_depth")."""
    return setting_flag(model.model_fields[key], *decls, help=help, **option)


def flags_from(model: type[BaseModel], *, panel: str, names: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Command-line flags generated from an options model's fields (as vLLM's EngineArgs makes argparse flags from
    its dataclass): `--field-name`, the field's description as help, its bounds as the flag's range, its
    ``metavar`` extra (else its choices) as the value's name, default None ("not given": the configuration applies).
    The model stays the one declaration; the command receives the values through `option_bundle`."""
    flags: dict[str, Any] = {}
    for name in names or tuple(model.model_fields):
        info = model.model_fields[name]
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        flags[name] = setting_flag(info, f"--{name.replace('_', '-')}", help=escape(info.description or ""),
                                   metavar=extra.get("metavar"), rich_help_panel=panel, show_default=False)
    return flags


ENGINE_FLAGS: dict[str, Any] = flags_from(EngineOptions, panel="Model and engine")


def with_engine_options(command: Callable[..., Any] | None = None, *,
                        exclude: tuple[str, ...] = ()) -> Any:
    """Give a command the model/engine flags; it receives them as ``engine_options: EngineOptions``."""
    decorate = option_bundle("engine_options", ENGINE_FLAGS, EngineOptions.of, exclude=exclude)
    return decorate(command) if command is not None else decorate


def _check_mode(method: str, mode: str) -> None:
    """Refuse a mode the method does not have while the flags are parsed, before anything loads: the search
    stage's one check, as a usage error (exit 2)."""
    try:
        method_spec(method).check_mode(mode)
    except ModeError as exc:   # the usage hint replaces the method's: without modes, what to do goes in the line
        advice = "" if exc.accepted else "; leave out --mode, or pick a method that has modes"
        raise typer.BadParameter(f"{exc.message} ({exc.code}){advice}", param_hint="--mode") from exc


@dataclass(frozen=True)
class MethodChoice:
    """The search method a command runs, its mode, and its own options (from -o pairs and the flags below)."""

    name: str | None     # None only where the command has no default method of its own (compose: its config's)
    mode: str | None = None
    options: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, method: str | None = None, mode: str | None = None, embedding_model: str | None = None,
           text: str | None = None, option: list[str] | None = None, preset: str | None = None, *,
           default: str | None = "hybrid") -> MethodChoice:
        """The choice from the flags; --mode is checked here only when the method is known (given, or ``default``)."""
        name = method or default
        if name is not None and mode is not None:
            _check_mode(name, mode)
        options: dict[str, Any] = parse_option_pairs(option or [])
        options.update({key: value for key, value in (("embedding_model", embedding_model), ("text", text),
                                                      ("preset", preset)) if value is not None})
        return cls(name, mode, options)

    def with_engine(self, engine_options: EngineOptions) -> dict[str, Any]:
        """The method's options plus the engine flags that were given (LLM methods take them as options), as given:
        what a command shows and records."""
        return {**self.options, **engine_options.model_dump(exclude_none=True)}

    def typed(self, engine_options: EngineOptions) -> BaseModel:
        """The options as the method's typed model, each value validated once: the flags and ``-o`` pairs here,
        the engine flags (checked already by `EngineOptions`) copied in as they are. A method without engine options
        is handed the engine flags to refuse, naming them, as it refuses any option it does not have."""
        assert self.name is not None
        spec = method_spec(self.name)
        engine = engine_options.model_dump(exclude_none=True)
        if not issubclass(spec.options, EngineOptions):
            return method_options(self.name, {**self.options, **engine})
        return method_options(self.name, {key: value for key, value in self.options.items()
                                          if key not in engine}).model_copy(update=engine)


_METHOD_PANEL = "Search method"
METHOD_FLAGS: dict[str, Any] = {
    "method": Annotated[str | None, typer.Option(
        "--method", "-m", rich_help_panel=_METHOD_PANEL, show_default=False,
        help=f"Search method: {' | '.join(method_names())} (default: hybrid; for compose, the steps' method, any "
             "but compose: default \\[compose] step_method).")],
    "mode": Annotated[str | None, typer.Option(
        "--mode", metavar="|".join(MODES), rich_help_panel=_METHOD_PANEL, show_default=False,
        help="Selection mode of LLM methods (default: `default_mode` in \\[search]).")],
    **flags_from(MethodFlags, panel=_METHOD_PANEL, names=("embedding_model", "text")),
    "option": Annotated[list[str] | None, typer.Option(
        "--option", "-o", rich_help_panel=_METHOD_PANEL, show_default=False,
        help="Any other method option, KEY=VALUE (repeatable), e.g. -o rrf_k=30.")],
    **flags_from(MethodFlags, panel=_METHOD_PANEL, names=("preset",)),
}

with_method_options = option_bundle("method", METHOD_FLAGS, MethodChoice.of)
# compose's method defaults to `[compose] step_method`, known only once the settings load: ``name`` stays None.
with_step_method_options = option_bundle("method", METHOD_FLAGS, functools.partial(MethodChoice.of, default=None))

NoCacheOption = Annotated[bool, typer.Option(
    "--no-cache", help="Ask the model afresh instead of reading the answers the registry's answer cache holds "
                       "(the fresh answers replace them).")]
