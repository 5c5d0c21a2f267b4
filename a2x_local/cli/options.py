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
from typing import Annotated, Any

import duckdb
import typer

from a2x_local.db import Mode, connect
from a2x_local.evaluation import load_query_texts
from a2x_local.llm import (
    ENGINE_NAMES,
    STRUCTURED_BACKENDS,
    EngineOptions,
    load_aliases,
    make_engine,
    with_answer_cache,
)
from a2x_local.locks import RegistryLock
from a2x_local.search import ModeError, check_queries, method_names, method_spec, parse_option_pairs
from a2x_local.settings import Settings, check_config, load_settings

DbOption = Annotated[
    Path | None,
    typer.Option("--db", help="Registry database file (default: $A2X_DB, else $A2X_HOME/registry.duckdb).",
                 show_default=False),
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


_ENGINE_PANEL = "Model and engine"
ENGINE_FLAGS: dict[str, Any] = {
    "model": Annotated[str | None, typer.Option(
        "--model", metavar="ALIAS|PATH", rich_help_panel=_ENGINE_PANEL, show_default=False,
        help="Model alias (see `a2x-local models list`) or a model folder; default: `model` in \\[engine].")],
    "engine": Annotated[str | None, typer.Option(
        "--engine", metavar="|".join(ENGINE_NAMES), rich_help_panel=_ENGINE_PANEL, show_default=False,
        help="vllm (offline batching), transformers (no vLLM needed) or openai (a server at --base-url); "
             "default: `name` in \\[engine].")],
    "base_url": Annotated[str | None, typer.Option(
        "--base-url", metavar="URL", rich_help_panel=_ENGINE_PANEL, show_default=False,
        help="OpenAI-compatible server for --engine openai, e.g. http://127.0.0.1:8000/v1.")],
    "max_model_len": Annotated[int | None, typer.Option(
        "--max-model-len", min=16, rich_help_panel=_ENGINE_PANEL, show_default=False,
        help="Context window in tokens (prompt + answer); smaller needs less memory.")],
    "dtype": Annotated[str | None, typer.Option(
        "--dtype", metavar="auto|bfloat16|float16|float32", rich_help_panel=_ENGINE_PANEL, show_default=False,
        help="Number format of the weights (float32 on CPUs without bfloat16 support).")],
    "gpu_memory_utilization": Annotated[float | None, typer.Option(
        "--gpu-memory-utilization", min=0.05, max=1.0, rich_help_panel=_ENGINE_PANEL, show_default=False,
        help="Share of each GPU's memory vLLM may use.")],
    "tensor_parallel_size": Annotated[int | None, typer.Option(
        "--tensor-parallel-size", min=1, rich_help_panel=_ENGINE_PANEL, show_default=False,
        help="Split the model across this many GPUs.")],
    "quantization": Annotated[str | None, typer.Option(
        "--quantization", metavar="METHOD", rich_help_panel=_ENGINE_PANEL, show_default=False,
        help="vLLM quantization method (awq, gptq, fp8, ...).")],
    "structured_backend": Annotated[str | None, typer.Option(
        "--structured-backend", metavar="|".join(STRUCTURED_BACKENDS), rich_help_panel=_ENGINE_PANEL,
        show_default=False,
        help="Structured-output backend; guidance (default) is the one measured to produce valid multi-item answers.")],
    "replicas": Annotated[int | None, typer.Option(
        "--replicas", min=1, max=4096, rich_help_panel=_ENGINE_PANEL, show_default=False,
        help="Copies of the model that share each round, one per GPU or tensor-parallel group, on Ray "
             "(the \\[distributed] extra); default: `replicas` in \\[engine] (1).")],
    "ray_address": Annotated[str | None, typer.Option(
        "--ray-address", metavar="ADDRESS", rich_help_panel=_ENGINE_PANEL, show_default=False,
        help="Ray cluster the replicas run on (ray://head:10001, or auto on a cluster node); default: a private "
             "Ray instance on this machine.")],
}


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
    except ModeError as exc:
        raise typer.BadParameter(f"{exc.message} ({exc.code})", param_hint="--mode") from exc


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
        """The method's options plus the engine flags that were given (LLM methods take them as options)."""
        return {**self.options, **engine_options.model_dump(exclude_none=True)}


_METHOD_PANEL = "Search method"
METHOD_FLAGS: dict[str, Any] = {
    "method": Annotated[str | None, typer.Option(
        "--method", "-m", rich_help_panel=_METHOD_PANEL, show_default=False,
        help=f"Search method: {' | '.join(method_names())} (default: hybrid; for compose, the steps' method, any "
             "but compose: default \\[compose] step_method).")],
    "mode": Annotated[str | None, typer.Option(
        "--mode", rich_help_panel=_METHOD_PANEL, show_default=False,
        help="Selection mode of LLM methods: get_all | get_important | get_one.")],
    "embedding_model": Annotated[str | None, typer.Option(
        "--embedding-model", rich_help_panel=_METHOD_PANEL, show_default=False,
        help="Embedding model of dense and hybrid (default: the registry's setting).")],
    "text": Annotated[str | None, typer.Option(
        "--text", rich_help_panel=_METHOD_PANEL, show_default=False,
        help="Indexed text: name_description | description.")],
    "option": Annotated[list[str] | None, typer.Option(
        "--option", "-o", rich_help_panel=_METHOD_PANEL, show_default=False,
        help="Any other method option, KEY=VALUE (repeatable), e.g. -o rrf_k=30.")],
    "preset": Annotated[str | None, typer.Option(
        "--preset", rich_help_panel=_METHOD_PANEL, show_default=False,
        help="LLM methods: settings of the token levers, default | published | lean (default: \\[search] preset; "
             "lean for engines billed per prompt token).")],
}

with_method_options = option_bundle("method", METHOD_FLAGS, MethodChoice.of)
# compose's method defaults to `[compose] step_method`, known only once the settings load: ``name`` stays None.
with_step_method_options = option_bundle("method", METHOD_FLAGS, functools.partial(MethodChoice.of, default=None))

NoCacheOption = Annotated[bool, typer.Option(
    "--no-cache", help="Ask the model afresh instead of reading the answers the registry's answer cache holds "
                       "(the fresh answers replace them).")]
