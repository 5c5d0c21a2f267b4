"""`make_engine`: from settings and `EngineOptions` to a ready engine of the kind registered under its name.

Precedence, lowest first: the `[engine]` table (packaged defaults, then user config files), the model alias's
recommendations (its `[models.NAME]` table), then the options (command-line flags). Options left None are ignored.
"""

from __future__ import annotations

import os
from functools import partial
from typing import Any

from a2x_local.errors import UserError
from a2x_local.llm.base import Engine
from a2x_local.llm.config import EngineConfig, engine_config, nest_overrides
from a2x_local.llm.engines import engine_kind
from a2x_local.llm.model_check import ModelCheck, check_model
from a2x_local.llm.models import ModelRef, resolve_model
from a2x_local.llm.options import EngineOptions
from a2x_local.llm.packaged_models import ensure_model
from a2x_local.settings import Settings, deep_merge


def engine_settings(settings: Settings, options: EngineOptions | None = None, *, must_exist: bool | None = None,
                    **extra: Any) -> tuple[ModelRef, EngineConfig]:
    """The resolved model and the merged, validated engine settings (no model is loaded).

    ``extra``: further `[engine]` / `[engine.openai]` / `[engine.transformers]` keys (``batch_size=4``).
    ``must_exist``: whether a path that is not an alias must exist (default: when the engine loads the model
    itself, not for a server's model).
    """
    options = options or EngineOptions()
    base = settings.section("engine")
    flags = nest_overrides({**options.table_overrides(), **extra, "name": options.engine_name})
    kind = engine_kind(flags.get("name") or base["name"])
    if must_exist is None:
        must_exist = kind.local_model
    ref = resolve_model(settings, options.model or base["model"], must_exist=must_exist)
    merged = deep_merge(deep_merge(base, ref.settings), flags)
    merged["model"] = ref.label
    return ref, engine_config(merged, where=f"[engine] + model '{ref.label}' + flags")


def make_engine(settings: Settings, options: EngineOptions | None = None, **extra: Any) -> Engine:
    """A ready engine for ``options`` (default: the `[engine]` table's model and engine).

    The vllm engine is shared: asking again for the same model and settings returns the running one. Missing or
    incomplete model folders raise `UserError` before anything loads; a missing engine library names its extra.
    With `replicas` > 1 or a `ray_address`, the engine is that many copies on Ray actors (`ReplicaEngine`).
    """
    ref, config = engine_settings(settings, options, **extra)
    kind = engine_kind(config.name)
    if kind.local_model:
        ensure_model(ref)
    if config.replicas > 1 or config.ray_address:
        if not kind.local_model:
            raise UserError(f"--replicas and --ray-address spread rounds over copies of a local engine; the "
                            f"'{config.name}' engine does not load its model here (a server batches for itself)",
                            hint="run several model servers behind one URL instead, or use --engine vllm with "
                                 "--replicas")
        return _replicated(settings, options or EngineOptions(), ref, config, extra)
    if kind.local_model:
        _preflight(ref, config)
    engine = kind.factory(ref, config)
    engine.round_chunk = config.round_chunk
    return engine


def _replicated(settings: Settings, options: EngineOptions, ref: ModelRef, config: EngineConfig,
                extra: dict[str, Any]) -> Engine:
    """The engine as `config.replicas` Ray actors, each running what ``make_engine`` gives for one replica."""
    _preflight(ref, config)
    from a2x_local.llm.replicas import ReplicaEngine

    one = options.model_copy(update={"replicas": 1, "ray_address": ""})
    inner = dict(extra)
    if config.tensor_parallel_size > 1 and config.distributed_executor_backend == "auto":
        inner["distributed_executor_backend"] = "mp"    # vLLM's advice for an engine inside a Ray actor
    return ReplicaEngine(partial(make_engine, settings, one, **inner), config.replicas, ray_config=config.ray,
                         ray_address=config.ray_address, gpus=float(config.tensor_parallel_size),
                         round_chunk=config.round_chunk, environment=_replica_environment())


def _replica_environment() -> dict[str, str]:
    """What each replica's process should see besides the cluster's environment: the offline switches, and on a
    CPU vLLM threads that do not pin the cores other replicas use."""
    keep = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "A2X_HOME", "A2X_MODELS_DIR", "A2X_CONFIG")
    environment = {key: os.environ[key] for key in keep if key in os.environ}
    environment.setdefault("VLLM_CPU_OMP_THREADS_BIND", os.environ.get("VLLM_CPU_OMP_THREADS_BIND", "nobind"))
    return environment


def check_ref(ref: ModelRef, config: EngineConfig, *, load_tokenizer: bool = True) -> ModelCheck:
    """`models check` for a resolved model under the engine settings it would run with."""
    return check_model(ref.path, target=ref.requested, alias=ref.alias, entry=ref.entry, dtype=config.dtype,
                       max_model_len=config.max_model_len, tensor_parallel_size=config.tensor_parallel_size,
                       load_tokenizer=load_tokenizer)


def _preflight(ref: ModelRef, config: EngineConfig) -> None:
    """Fail in a second with the list of what is missing, rather than minutes into an engine start."""
    check = check_ref(ref, config, load_tokenizer=False)
    if not check.ok:
        raise UserError(f"model '{ref.label}' at {ref.path} is not usable: " + " ".join(check.problems),
                        hint=f"Run `a2x-local models check {ref.requested}` for details; see models/README.md.")
