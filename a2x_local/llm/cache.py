"""Model answers kept in the registry file, so a rebuild re-sends only the prompts that changed.

A greedy decode (temperature 0) of the same prompt, under the same constraint and budget, by the same model with
the same answer-changing settings, gives the same text: reading that text back is the same as asking again, for
free. The cache wraps any engine (`with_answer_cache`), so every engine and every stage that calls one gets it
without knowing; only answers that were valid at the first attempt of a temperature-0 request are kept (a retry
of an invalid answer samples warmer, which is not reproducible). Answers read back are validated again, counted
apart from the prompts sent (``Usage`` ``cached`` and ``cached_*_tokens``: what they would have cost).

The database is opened only around each lookup and each write, never while the model works, as the build does.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pydantic import ConfigDict, Field, StrictBool

from a2x_local.db import connect, load_temp_table
from a2x_local.llm.base import Engine
from a2x_local.llm.embedding import model_signature
from a2x_local.llm.types import ChoiceConstraint, JsonConstraint, Message, RawOutput, Request, Result, validate
from a2x_local.settings import SectionConfig, Settings

# Settings an engine describes that cannot change a greedy answer: memory, parallelism, transport, batching.
_NOT_ANSWER_SETTINGS = frozenset({"max_model_len", "gpu_memory_utilization", "tensor_parallel_size", "concurrency",
                                  "timeout_s", "max_retries", "batch_size", "seed", "replicas", "ray_address"})


class CacheConfig(SectionConfig):
    """The `[cache]` table; the packaged default.toml says what each key means."""

    model_config = ConfigDict(frozen=True)
    section: ClassVar[str] = "cache"

    enabled: StrictBool
    keep_days: int = Field(ge=0, le=36_500)


def engine_identity(engine: Engine) -> dict[str, Any]:
    """What decides an engine's answers besides the request: its description without the settings that do not,
    plus the chat template's arguments and a signature of the weights' files (replaced weights: a new model)."""
    identity = {key: value for key, value in engine.describe().items() if key not in _NOT_ANSWER_SETTINGS}
    config = getattr(engine, "config", None)
    template = getattr(config, "chat_template_kwargs", None)
    if template:
        identity["chat_template_kwargs"] = template
    path = identity.get("path")
    if path and Path(path).is_dir():
        identity["weights"] = model_signature(Path(path))
    return identity


def constraint_spec(request: Request) -> dict[str, Any]:
    constraint = request.constraint
    if isinstance(constraint, JsonConstraint):
        return {"json": constraint.schema()}
    if isinstance(constraint, ChoiceConstraint):
        return {"choice": list(constraint.options)}
    return {"regex": constraint.pattern}


def answer_key(identity: dict[str, Any], request: Request) -> str:
    """SHA-256 over everything that decides a greedy answer: engine, constraint, budget and the prompt itself."""
    payload = {"engine": identity, "constraint": constraint_spec(request), "max_tokens": request.max_tokens,
               "messages": [dict(m) for m in request.messages]}
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class CachedAnswer:
    text: str
    prompt_tokens: int
    completion_tokens: int


class AnswerCache:
    """The `llm_cache` table of one registry file (``lock_timeout_s``: `settings.lock_timeout_s`; None, the packaged
    one)."""

    def __init__(self, db_path: Path, *, lock_timeout_s: float | None = None) -> None:
        self.db_path = Path(db_path)
        self.lock_timeout_s = lock_timeout_s

    def lookup(self, keys: Iterable[str]) -> dict[str, CachedAnswer]:
        """The cached answers among ``keys``; marks them used (pruning keeps what is used)."""
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return {}
        with connect(self.db_path, lock_timeout_s=self.lock_timeout_s) as con:
            rows = con.execute("SELECT key, text, prompt_tokens, completion_tokens FROM llm_cache"
                               " WHERE key IN (SELECT unnest(?))", [wanted]).fetchall()
            if rows:
                con.execute("UPDATE llm_cache SET used_at = now(), hits = hits + 1 WHERE key IN (SELECT unnest(?))",
                            [[row[0] for row in rows]])
        return {key: CachedAnswer(text, prompt, completion) for key, text, prompt, completion in rows}

    def store(self, model: str, entries: Sequence[tuple[str, str, str, int, int]]) -> None:
        """Keep (key, call type, text, prompt tokens, completion tokens) answers."""
        if not entries:
            return
        rows = ({"key": key, "model": model, "call_type": label, "text": text, "prompt_tokens": prompt,
                 "completion_tokens": completion} for key, label, text, prompt, completion in entries)
        with connect(self.db_path, lock_timeout_s=self.lock_timeout_s) as con:
            load_temp_table(con, "_answers", _ROW_COLUMNS, rows)
            con.execute("INSERT OR REPLACE INTO llm_cache SELECT key, model, call_type, text, prompt_tokens,"
                        " completion_tokens, now(), now(), 0 FROM _answers")

    def prune(self, keep_days: int) -> int:
        """Forget answers unused for more than ``keep_days`` days (0: keep everything); returns how many went."""
        if keep_days <= 0:
            return 0
        with connect(self.db_path, lock_timeout_s=self.lock_timeout_s) as con:
            row = con.execute("DELETE FROM llm_cache WHERE used_at < CAST(now() AS TIMESTAMP) - to_days(?)"
                              " RETURNING key", [int(keep_days)]).fetchall()
        return len(row)

    def size(self) -> int:
        with connect(self.db_path, lock_timeout_s=self.lock_timeout_s) as con:
            return con.execute("SELECT count(*) FROM llm_cache").fetchone()[0]


_ROW_COLUMNS = {"key": "VARCHAR", "model": "VARCHAR", "call_type": "VARCHAR", "text": "VARCHAR",
                "prompt_tokens": "INTEGER", "completion_tokens": "INTEGER"}


class CachedEngine(Engine):
    """Any engine, with deterministic answers read from and written to an `AnswerCache`.

    It shares the wrapped engine's ``usage``, so callers that count through ``engine.usage`` see the prompts sent
    (and their rounds) exactly as before, plus the answers the cache gave. ``read`` False asks the model afresh
    every time and only refreshes the cache (`--no-cache`).
    """

    def __init__(self, inner: Engine, cache: AnswerCache, *, read: bool = True) -> None:
        self.inner = inner
        self.cache = cache
        self.read = read
        self.usage = inner.usage
        self.name = inner.name
        self._identity: dict[str, Any] | None = None

    def __getattr__(self, name: str) -> Any:
        # Engine-specific helpers (a tokenizer's render, a server's served_model) stay reachable.
        inner = self.__dict__.get("inner")
        if inner is None:
            raise AttributeError(name)
        return getattr(inner, name)

    @property
    def max_model_len(self) -> int | None:
        return self.inner.max_model_len

    @property
    def round_chunk(self) -> int:  # type: ignore[override]
        return self.inner.round_chunk

    def token_counter(self) -> Any:
        return self.inner.token_counter()

    def describe(self) -> dict[str, Any]:
        return {**self.inner.describe(), "answer_cache": True}

    def count_prompt_tokens(self, messages: Sequence[Message]) -> int:
        return self.inner.count_prompt_tokens(messages)

    def identity(self) -> dict[str, Any]:
        if self._identity is None:
            served = getattr(self.inner, "served_model", None)
            if callable(served):   # a server's model name is known only after asking it
                served()
            self._identity = engine_identity(self.inner)
        return self._identity

    def _generate(self, requests: Sequence[Request]) -> list[RawOutput]:
        return self.inner._generate(requests)

    def generate(self, requests: Sequence[Request]) -> list[Result]:
        requests = list(requests)
        if not requests:
            return []
        identity = self.identity()
        keys = {i: answer_key(identity, r) for i, r in enumerate(requests) if r.temperature == 0}
        found = self.cache.lookup(keys.values()) if self.read else {}
        results: list[Result | None] = [None] * len(requests)
        for i, key in keys.items():
            answer = found.get(key)
            if answer is None:
                continue
            result = validate(requests[i], RawOutput(answer.text, 0, 0, "stop"))
            if not result.ok:   # cannot happen for a key that names the constraint, but never trust stored text
                continue
            result.attempts, result.cached = 0, True
            results[i] = result
            self.usage.record(requests[i].label, cached=1, cached_prompt_tokens=answer.prompt_tokens,
                              cached_completion_tokens=answer.completion_tokens)
        missing = [i for i, result in enumerate(results) if result is None]
        if missing:
            fresh = self.inner.generate([requests[i] for i in missing])
            keep = []
            for i, result in zip(missing, fresh, strict=True):
                results[i] = result
                if i in keys and result.ok and result.attempts == 1:
                    keep.append((keys[i], requests[i].label, result.text, result.prompt_tokens,
                                 result.completion_tokens))
            self.cache.store(str(identity.get("model") or identity.get("engine")), keep)
        return [result for result in results if result is not None]

    def close(self) -> None:
        self.inner.close()


def with_answer_cache(engine: Engine, settings: Settings, *, read: bool = True) -> Engine:
    """``engine`` with the registry file's answer cache when `[cache] enabled`; ``read`` False (`--no-cache`):
    every prompt goes to the model, and its answers replace the cached ones."""
    if not CacheConfig.from_settings(settings).enabled or isinstance(engine, CachedEngine):
        return engine
    return CachedEngine(engine, AnswerCache(settings.db_path, lock_timeout_s=settings.lock_timeout_s), read=read)
