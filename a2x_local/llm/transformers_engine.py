"""transformers + Outlines, for machines without vLLM: a round runs as batched `generate` calls.

Outlines supplies the constraint machinery (its llguidance logits processor and tokenizer bridge); generation is
`model.generate` with that processor. `outlines.Generator.batch` would make the same call but returns decoded text
only, and the engine contract needs token ids: the finish reason ("stop" vs cut off) and exact token counts.

With the default `guidance` backend every row carries its own grammar, so requests with different constraints
share a batch (chunks of ``batch_size``, split only by sampling settings). The other backends go through Outlines'
own processors, one grammar per call, so requests are grouped by constraint first.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from a2x_local.errors import UserError
from a2x_local.extras import check
from a2x_local.llm.base import Engine
from a2x_local.llm.config import EngineConfig
from a2x_local.llm.constraints import closed_schema, constraint_key, grammar_problem, llguidance_grammar
from a2x_local.llm.hardware import resolve_dtype
from a2x_local.llm.models import force_offline
from a2x_local.llm.sanitize import MarkerStripper, tokenizer_special_tokens
from a2x_local.llm.startup_log import engine_startup
from a2x_local.llm.tokens import ChatTokenCounter
from a2x_local.llm.types import ChoiceConstraint, JsonConstraint, Message, RawOutput, Request

# Outlines backend names for the settings that are not our llguidance default.
_OUTLINES_BACKENDS = {"xgrammar": "xgrammar", "outlines": "outlines_core"}
_DTYPES = {"float32": "float32", "float": "float32", "float16": "float16", "half": "float16",
           "bfloat16": "bfloat16"}


# Further logits processors for one batch, given its requests and the prompt width (the padded prompt length).
BatchProcessors = Callable[[Sequence[Request], int], list[Any]]


class TransformersEngine(Engine):
    """A Hugging Face causal LM with constrained decoding. Slower than vLLM, but needs only torch.

    Two hooks, for custom decoding and for tests (which must not replace the engine's own methods):
    ``logits_processors(requests, prompt_width)`` gives further logits processors for a batch, applied before the
    constraint's; every callable in ``batch_observers`` is told the requests of each `model.generate` call, in order
    (how a test sees which requests shared a batch)."""

    name = "transformers"

    def __init__(self, model_path: Path | str, config: EngineConfig, *, model_label: str | None = None,
                 logits_processors: BatchProcessors | None = None) -> None:
        super().__init__()
        force_offline()
        self.model_path = Path(model_path)
        self.config = config
        self.model_label = model_label or str(self.model_path)
        self.logits_processors = logits_processors
        self.batch_observers: list[Callable[[Sequence[Request]], None]] = []
        self._load()

    def _load(self) -> None:
        check("transformers", "outlines", "torch", "llguidance", feature="the transformers engine")
        with engine_startup(f"transformers for {self.model_label}"):
            self._load_model()

    def _load_model(self) -> None:
        import outlines
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        device = self.config.transformers.device
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        # "auto" on a CPU: bfloat16 only where the CPU computes it natively (hardware.py)
        dtype = _DTYPES.get(str(resolve_dtype(self.config.dtype, on_gpu=device != "cpu").value), "auto")
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(self.model_path, local_files_only=True)
            self.model = AutoModelForCausalLM.from_pretrained(self.model_path, dtype=dtype, local_files_only=True)
        except (OSError, ValueError, KeyError) as exc:
            raise UserError(f"transformers could not load {self.model_label} from {self.model_path}: {exc}",
                            hint=f"Run `a2x-local models check {self.model_path}`.") from exc
        except torch.OutOfMemoryError as exc:
            raise UserError(f"out of memory loading {self.model_label} ({self.model_path})",
                            hint="Use a smaller model, --dtype bfloat16, or the vllm engine.") from exc
        self.model.to(device).eval()
        self.device = device
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self._eos_ids = _eos_ids(self.model, self.tokenizer)
        self.stripper = MarkerStripper(tokenizer_special_tokens(self.tokenizer))
        self._outlines_model = outlines.from_transformers(self.model, self.tokenizer)
        self._backend = None

    @property
    def max_model_len(self) -> int:
        limit = int(getattr(self.model.config, "max_position_embeddings", self.config.max_model_len))
        return min(limit, self.config.max_model_len)

    def describe(self) -> dict[str, Any]:
        import transformers

        return {"engine": self.name, "model": self.model_label, "path": str(self.model_path),
                "transformers": transformers.__version__, "dtype": str(self.model.dtype).removeprefix("torch."),
                "device": self.device, "max_model_len": self.max_model_len,
                "structured_backend": self.config.structured_backend,
                "batch_size": self.config.transformers.batch_size}

    def render(self, messages: Sequence[Message]) -> str:
        return self.tokenizer.apply_chat_template([dict(m) for m in messages], tokenize=False,
                                                  add_generation_prompt=True, **self.config.chat_template_kwargs)

    def count_prompt_tokens(self, messages: Sequence[Message]) -> int:
        return len(self.tokenizer(self.render(messages), add_special_tokens=False)["input_ids"])

    def token_counter(self) -> ChatTokenCounter:
        return ChatTokenCounter(str(self.model_path), self.config.chat_template_kwargs)

    def _processor(self, requests: Sequence[Request]) -> Any:
        """A fresh logits processor for one batch (processors keep per-row parser state)."""
        backend = self.config.structured_backend
        if backend not in _OUTLINES_BACKENDS:
            from outlines.backends.llguidance import LLGuidanceBackend

            from a2x_local.llm.guidance_processor import RowGrammarProcessor

            if self._backend is None:
                self._backend = LLGuidanceBackend(self._outlines_model)
            return RowGrammarProcessor([llguidance_grammar(r.constraint) for r in requests],
                                       self._backend.llg_tokenizer)
        from outlines.backends import get_json_schema_logits_processor, get_regex_logits_processor
        from outlines.types.dsl import either, to_regex

        name = _OUTLINES_BACKENDS[backend]
        constraint = requests[0].constraint
        if isinstance(constraint, JsonConstraint):
            return get_json_schema_logits_processor(name, self._outlines_model,
                                                    json.dumps(closed_schema(constraint.schema())))
        if isinstance(constraint, ChoiceConstraint):
            return get_regex_logits_processor(name, self._outlines_model, to_regex(either(*constraint.options)))
        return get_regex_logits_processor(name, self._outlines_model, constraint.pattern)

    def _generate(self, requests: Sequence[Request]) -> list[RawOutput]:
        outputs: list[RawOutput | None] = [None] * len(requests)
        groups: dict[tuple[Any, ...], list[int]] = {}
        per_row = self.config.structured_backend not in _OUTLINES_BACKENDS
        for i, request in enumerate(requests):
            problem = grammar_problem(request.constraint) if per_row else None
            if problem:
                outputs[i] = RawOutput("", 0, 0, "error", error=problem)
                continue
            key = (request.temperature, request.seed) + (() if per_row else (constraint_key(request.constraint),))
            groups.setdefault(key, []).append(i)
        size = self.config.transformers.batch_size
        for members in groups.values():
            # Similar lengths share a batch: less padding, and one long prompt does not shrink everyone's room.
            members.sort(key=lambda i: sum(len(m["content"]) for m in requests[i].messages))
            for start in range(0, len(members), size):
                chunk = members[start:start + size]
                for i, output in zip(chunk, self._run_batch([requests[i] for i in chunk]), strict=True):
                    outputs[i] = output
        return [output for output in outputs if output is not None]

    def _run_batch(self, requests: list[Request]) -> list[RawOutput]:
        import torch
        from transformers import LogitsProcessorList

        texts = [self.render(r.messages) for r in requests]
        encoded = self.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        prompt_lengths = encoded["attention_mask"].sum(dim=1).tolist()
        width = encoded["input_ids"].shape[1]
        room = self.max_model_len - width
        if room < 1:
            too_long = max(prompt_lengths)
            if len(requests) > 1:
                # One long prompt must not fail its neighbours: split and retry the halves.
                half = len(requests) // 2
                return self._run_batch(requests[:half]) + self._run_batch(requests[half:])
            return [RawOutput("", too_long, 0, "error",
                              error=f"prompt has {too_long} tokens, the model's context is {self.max_model_len} "
                                    "(max_model_len): shorten the prompt or raise --max-model-len")]
        budget = min(max(r.max_tokens for r in requests), room)
        first = requests[0]
        sample = first.temperature > 0
        if first.seed is not None:
            torch.manual_seed(first.seed)
        extra = self.logits_processors(requests, width) if self.logits_processors is not None else []
        processors = LogitsProcessorList([*extra, self._processor(requests)])
        for observer in self.batch_observers:
            observer(requests)
        with torch.inference_mode():
            generated = self.model.generate(
                **encoded.to(self.device), logits_processor=processors, max_new_tokens=budget,
                do_sample=sample, temperature=first.temperature if sample else None, top_p=None, top_k=None,
                pad_token_id=self.tokenizer.pad_token_id, eos_token_id=sorted(self._eos_ids))
        new_tokens = generated[:, width:].tolist()
        return [self._raw_output(ids, prompt, min(r.max_tokens, budget))
                for ids, prompt, r in zip(new_tokens, prompt_lengths, requests, strict=True)]

    def _raw_output(self, ids: list[int], prompt_tokens: int, budget: int) -> RawOutput:
        end = next((k for k, token in enumerate(ids[:budget]) if token in self._eos_ids), None)
        if end is None:
            kept = ids[:budget]
            return RawOutput(self.tokenizer.decode(kept, skip_special_tokens=True), prompt_tokens, len(kept),
                             "length")
        # The end-of-turn token counts as generated, as vLLM counts it.
        return RawOutput(self.tokenizer.decode(ids[:end], skip_special_tokens=True), prompt_tokens, end + 1, "stop")

    def close(self) -> None:
        for attribute in ("model", "_outlines_model", "_backend"):
            self.__dict__.pop(attribute, None)


def _eos_ids(model: Any, tokenizer: Any) -> set[int]:
    """Every token that ends a turn: the generation config may list several (Qwen: <|im_end|>, <|endoftext|>)."""
    ids: set[int] = set()
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for value in (configured, tokenizer.eos_token_id):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, list | tuple):
            ids.update(int(v) for v in value)
    return ids
