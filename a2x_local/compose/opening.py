"""`open_composer`: from settings and choices to a ready `Composer`, checking input before anything heavy loads.

Order: the configuration and the steps file, then the registry snapshot, then the step method (retrieval indexes
are built on the way when missing or stale), and the engine last, so bad input fails before a model loads. One
engine serves both the model decomposer and an LLM step method (`a2x`, `select`, ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from a2x_local.compose.compatibility import profiles
from a2x_local.compose.config import ComposeConfig
from a2x_local.compose.decompose import ModelDecomposer
from a2x_local.compose.planner import Composer
from a2x_local.compose.relevance import Confidence, Relevance
from a2x_local.compose.rerank import Reranker
from a2x_local.compose.steps_file import StepsBook, StepsBounds, load_steps_file
from a2x_local.db import connect
from a2x_local.errors import UserError
from a2x_local.jsonfiles import JsonLimits
from a2x_local.llm import ENGINE_OPTION_NAMES, Engine, EngineOptions, check_ref, engine_settings, make_engine
from a2x_local.registry import Registry
from a2x_local.search import (
    ProgressFactory,
    keyword_tokenizer,
    make_method,
    method_names,
    method_spec,
    open_similarity,
)
from a2x_local.search import method_options as typed_options  # `open_composer` takes method_options (values)
from a2x_local.settings import Settings
from a2x_local.taxonomy import Tree, active_build_id, load_tree

COMPOSE = "compose"


def step_method_names() -> list[str]:
    """The methods that may search a plan's steps: every method this process can make, but compose itself."""
    return [name for name in method_names() if name != COMPOSE]


def _snapshot(settings: Settings, db_path: Path) -> tuple[list[Any], Tree | None, str | None]:
    """The registry's services and its active tree (None, with a note, when there is none or it is stale)."""
    with connect(db_path, lock_timeout_s=settings.lock_timeout_s, mode="read") as con:
        registry = Registry(con)
        services = registry.all()
        build_id = active_build_id(con)
        tree = load_tree(con, build_id) if build_id is not None else None
        fingerprint = registry.fingerprint()
    if not services:
        raise UserError(f"{db_path}: the registry is empty, there is nothing to compose from",
                        hint="load services first: a2x-local ingest PATH")
    if tree is not None and tree.registry_fingerprint != fingerprint:
        return services, None, (f"the active tree (id {tree.build_id}) is stale, so its categories are not used "
                                "for compatibility")
    return services, tree, None


def model_available(settings: Settings, options: EngineOptions) -> bool:
    """Whether "auto" may decompose with a model: one was named (or a server), or the configured one is installed."""
    if options.model or options.base_url or options.engine_name == "openai":
        return True
    try:
        ref, config = engine_settings(settings, options)
    except UserError:
        return False
    if config.name == "openai":
        return bool(config.openai.base_url)
    return check_ref(ref, config, load_tokenizer=False).ok


def _decomposer(config: ComposeConfig, steps: StepsBook | None, settings: Settings, engine: Engine | None,
                options: EngineOptions, start_engine: bool) -> str:
    if steps is not None:
        return "file"
    if config.decomposer == "auto":
        usable = engine is not None or (start_engine and model_available(settings, options))
        return "model" if usable else "rule"
    return config.decomposer


def _relevance(settings: Settings, db_path: Path, method: Any, config: ComposeConfig,
               progress: ProgressFactory | None) -> tuple[Relevance | None, str | None]:
    """The dense model's cosines for Eq. 4 and the confidences (None, with a note, when it cannot be had)."""
    try:
        similarity = open_similarity(settings, db_path, method=method, progress=progress)
    except UserError as exc:
        return None, (f"no dense model ({exc.message}), so similarity is the step method's rank and steps carry "
                      "no confidence")
    confidence = Confidence(config.confidence_z, config.confidence_scale, config.low_confidence)
    return Relevance(similarity, confidence, probe_depth=config.candidates), None


def _tokenizer(settings: Settings) -> Any:
    """BM25's words for keyword co-occurrence (None without the retrieval extra: the signal is then absent)."""
    try:
        return keyword_tokenizer(settings)
    except UserError:
        return None


def open_composer(settings: Settings, *, db_path: Path | None = None, engine: Engine | None = None,
                  engine_options: EngineOptions | None = None, method_options: Mapping[str, Any] | None = None,
                  steps: str | Path | StepsBook | None = None, progress: ProgressFactory | None = None,
                  start_engine: bool = True, **overrides: Any) -> Composer:
    """A composer over the registry at ``db_path`` (default: the settings' database).

    ``overrides`` are `[compose]` keys (decomposer, step_method, candidates, alpha, sad, max_steps, ...; None =
    the configuration). ``method_options`` go to the step method. ``engine`` is a running engine to use (it stays
    open); otherwise one is started from ``engine_options`` when the decomposer or the step method needs a model,
    and `Composer.close` releases it. With ``start_engine`` False none is started: "auto" decomposes by the rules,
    and a choice that needs a model is refused (code NoModel).
    """
    config = ComposeConfig.from_settings(settings, **overrides)
    db_path = Path(db_path or settings.db_path)
    engine_options = engine_options or EngineOptions()
    if config.step_method == COMPOSE:
        raise UserError("compose cannot search its own steps with compose", code="UnknownMethod",
                        hint=f"pick a step method: {', '.join(step_method_names())}")
    spec = method_spec(config.step_method, offered=step_method_names())
    bounds = StepsBounds(config.max_steps, config.step_chars)
    book = (steps if isinstance(steps, StepsBook) or steps is None else
            load_steps_file(steps, JsonLimits.from_settings(settings), bounds, max_bytes=config.max_steps_file_bytes))
    if book is not None:
        book.check_bounds(bounds)
    services, tree, stale_note = _snapshot(settings, db_path)
    decomposer = _decomposer(config, book, settings, engine, engine_options, start_engine)
    step_engine = spec.needs_engine or (spec.takes_engine and engine is not None)
    options = {key: value for key, value in (method_options or {}).items() if key not in ENGINE_OPTION_NAMES}
    method = None if step_engine else make_method(config.step_method, settings, db_path, progress=progress,
                                                  options=typed_options(config.step_method, options))
    owns_engine = False
    if engine is None and (decomposer == "model" or step_engine or config.rerank):
        if not start_engine:
            needs = (f"the {config.step_method} step method" if step_engine else
                     "the model decomposer" if decomposer == "model" else "re-ranking")
            raise UserError(f"{needs} needs a model, and none runs here", code="NoModel",
                            hint="use a retrieval step method (hybrid, dense, bm25) and the rule decomposer, or "
                                 "give a model")
        engine = make_engine(settings, engine_options)
        owns_engine = True
    try:
        if method is None:
            typed = typed_options(config.step_method, {**options, "engine": engine})
            method = make_method(config.step_method, settings, db_path, progress=progress, options=typed)
        model = ModelDecomposer(engine, config) if decomposer == "model" else None
    except BaseException:
        if owns_engine and engine is not None:
            engine.close()
        raise
    try:
        relevance, dense_note = _relevance(settings, db_path, method, config, progress)
    except BaseException:
        if owns_engine and engine is not None:
            engine.close()
        raise
    notes = [note for note in (stale_note, dense_note) if note]
    if decomposer == "rule" and config.decomposer == "auto":
        notes.append("no model is installed, so the rule decomposer split the request (give --model to use one)")
    names = {service.id: service.name for service in services}
    found, weights = profiles(services, tree, _tokenizer(settings))
    reranker = Reranker(engine, depth=config.rerank_candidates, names=names,
                        descriptions={service.id: service.description for service in services},
                        temperature=config.temperature, seed=config.seed) if engine is not None else None
    # An engine given but not needed by the default plan (rule decomposer, retrieval steps, no re-rank) is not
    # this composer's to describe; it still serves `plan(rerank=True)`.
    used = engine if model or step_engine or config.rerank else None
    return Composer(config=config, method=method, method_name=config.step_method, names=names, profiles=found,
                    decomposer=decomposer, model=model, steps=book, engine=used, owns_engine=owns_engine,
                    step_modes=spec.modes, notes=notes, relevance=relevance, weights=weights, reranker=reranker)
