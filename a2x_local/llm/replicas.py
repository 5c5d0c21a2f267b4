"""Replicas of one engine on Ray: each round of prompts is spread over N copies of the model (one per GPU, or per
tensor-parallel group), on this machine or across a Ray cluster.

Why Ray actors holding our own engine, rather than Ray Data's LLM batch processor: a build is ~20 dependent
rounds, and a processor starts its engines for each dataset it runs (sequential processors cannot share a vLLM
deployment: ray-project/ray#52277), so every round would load the model again; it renders and validates prompts
in its own stages, where ours carry per-request constraints (regex, bounded JSON, choice) checked and retried by
`Engine.generate`, the answer cache and our accounting by call type. Here every replica is a long-lived actor
holding the same engine a single process would run (vLLM with prefix caching and the guidance backend), and
everything else stays in the driver: the fit check, validation, the one retry, the answer cache and the counting.
A replica only turns prompts into raw text, so answers under greedy decoding are the ones a single engine gives.

A round (or a streamed chunk of one) is cut into contiguous slices, so requests about one node, which share their
prefix, mostly land on the same replica's prefix cache. Each replica holds ``in_flight_per_replica`` slices at
once and gets the next one as it finishes: a slow replica takes fewer slices. Ray is imported only here, only when
replicas are asked for (the `[distributed]` extra).
"""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from pydantic import BaseModel

from a2x_local.errors import UserError
from a2x_local.extras import require
from a2x_local.llm.base import Engine
from a2x_local.llm.config import RayConfig
from a2x_local.llm.types import JsonConstraint, Message, RawOutput, Request

EngineFactory = Callable[[], Engine]


class _Placeholder(BaseModel):
    """Stands for a request's answer model on the wire: replicas constrain by the schema and never parse."""


@dataclass(frozen=True)
class WireJson(JsonConstraint):
    """A JSON constraint as its schema text: pydantic models made at run time do not travel between processes."""

    schema_text: str = "{}"

    @cached_property
    def _schema(self) -> dict[str, Any]:
        return json.loads(self.schema_text)

    def schema(self) -> dict[str, Any]:
        return self._schema


def wire(request: Request) -> Request:
    """The request as a replica receives it (the same prompt, constraint and budget)."""
    constraint = request.constraint
    if isinstance(constraint, JsonConstraint) and not isinstance(constraint, WireJson):
        constraint = WireJson(_Placeholder, json.dumps(constraint.schema(), sort_keys=True))
    return replace(request, constraint=constraint, context=dict(request.context))


class ReplicaHost:
    """What runs inside each replica's Ray actor: one engine, answering raw text for slices of a round."""

    def __init__(self, factory: EngineFactory, environment: dict[str, str]) -> None:
        for key, value in environment.items():
            os.environ.setdefault(key, value)
        self.engine = factory()

    def profile(self) -> dict[str, Any]:
        engine = self.engine
        return {"name": engine.name, "describe": engine.describe(), "max_model_len": engine.max_model_len,
                "stripper": engine.stripper, "strip_markers": engine.strip_markers,
                "counter": engine.token_counter(), "config": getattr(engine, "config", None)}

    def answer(self, requests: list[Request]) -> list[RawOutput]:
        return self.engine._generate(requests)

    def count(self, messages: list[Message]) -> int:
        return self.engine.count_prompt_tokens(messages)

    def close(self) -> None:
        self.engine.close()


def slices(count: int, parts: int) -> list[range]:
    """``count`` items cut into ``min(count, parts)`` contiguous ranges whose sizes differ by at most one."""
    parts = max(1, min(parts, count))
    size, extra = divmod(count, parts)
    bounds = [k * size + min(k, extra) for k in range(parts + 1)]
    return [range(bounds[k], bounds[k + 1]) for k in range(parts)] if count else []


class ReplicaEngine(Engine):
    """``replicas`` copies of the engine ``factory`` makes, each in a Ray actor; one engine to every caller.

    ``gpus``: GPUs each replica reserves (its tensor-parallel group); ``ray_address``: a running cluster, or ""
    for a private Ray instance on this machine, started with ``ray_config`` and stopped by ``close``.
    """

    def __init__(self, factory: EngineFactory, replicas: int, *, ray_config: RayConfig, ray_address: str = "",
                 gpus: float = 0.0, round_chunk: int | None = None, environment: dict[str, str] | None = None) -> None:
        super().__init__()
        self.replicas = replicas
        self.ray_address = ray_address
        self.ray_config = ray_config
        self._ray = require("ray", feature="replicas (--replicas, --ray-address)")
        self._owns_ray = self._connect()
        try:
            self._actors = self._start_actors(factory, gpus, environment or {})
            profile = self._profiles()
        except BaseException:
            self.close()
            raise
        self.name = profile["name"]
        self._describe = profile["describe"]
        self._max_model_len = profile["max_model_len"]
        self.stripper = profile["stripper"]
        self.strip_markers = profile["strip_markers"]
        self._counter = profile["counter"]
        if profile["config"] is not None:
            self.config = profile["config"]   # what the answer cache reads of an engine (chat template arguments)
        self.round_chunk = (round_chunk or Engine.round_chunk) * replicas

    # -- starting ----------------------------------------------------------------------------------------------

    def _connect(self) -> bool:
        """Join the cluster at ``ray_address`` or start a private instance; True when we started it."""
        ray = self._ray
        if ray.is_initialized():
            return False
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")   # offline: nothing phones home
        quiet = {"include_dashboard": False, "log_to_driver": False, "logging_level": "WARNING"}
        try:
            if self.ray_address:
                ray.init(address=self.ray_address, **quiet)
                return True
            config = self.ray_config
            ray.init(num_cpus=config.num_cpus or None, object_store_memory=config.object_store_mb * 2**20,
                     _node_ip_address="127.0.0.1", **quiet)
        except Exception as exc:  # Ray raises ConnectionError, RuntimeError, ValueError... all mean one thing here
            where = f"the Ray cluster at {self.ray_address}" if self.ray_address else "a local Ray instance"
            raise UserError(f"could not start the replicas: cannot reach {where}: {type(exc).__name__}: {exc}",
                            hint="start the cluster first (`ray start --head` on the head node, `ray start "
                                 "--address HEAD:6379` on the others), or leave --ray-address out to run the "
                                 "replicas on this machine") from exc
        return True

    def _start_actors(self, factory: EngineFactory, gpus: float, environment: dict[str, str]) -> list[Any]:
        ray = self._ray
        config = self.ray_config
        if config.gpus_per_replica != "auto":
            gpus = float(config.gpus_per_replica)
        elif not ray.cluster_resources().get("GPU"):
            gpus = 0.0
        host = ray.remote(ReplicaHost).options(num_cpus=config.cpus_per_replica, num_gpus=gpus,
                                               max_concurrency=1)
        return [host.remote(factory, environment) for _ in range(self.replicas)]

    def _profiles(self) -> dict[str, Any]:
        profiles = self._get([actor.profile.remote() for actor in self._actors], "start")
        first = profiles[0]
        for number, other in enumerate(profiles[1:], start=2):
            if other["describe"] != first["describe"]:
                raise UserError(f"replica {number} runs {other['describe']}, replica 1 {first['describe']}",
                                hint="every node of the cluster needs the same model files and versions")
        return first

    def _get(self, refs: Any, doing: str) -> Any:
        ray = self._ray
        try:
            return ray.get(refs)
        except ray.exceptions.RayError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, UserError):
                raise cause from exc
            text = str(exc).strip().splitlines()
            raise UserError(f"a replica failed to {doing}: {type(exc).__name__}: {text[-1] if text else ''}",
                            hint="see the replica's log under /tmp/ray/session_latest/logs; a lost replica is often"
                                 " out of memory (fewer --replicas, a smaller --max-model-len); a build continues with"
                                 " `a2x-local build --resume`") from exc

    # -- the engine interface ----------------------------------------------------------------------------------

    @property
    def max_model_len(self) -> int | None:
        return self._max_model_len

    def describe(self) -> dict[str, Any]:
        return {**self._describe, "replicas": self.replicas, "ray_address": self.ray_address}

    def count_prompt_tokens(self, messages: Sequence[Message]) -> int:
        if self._counter is not None:
            return self._counter(messages)
        return self._get(self._actors[0].count.remote([dict(m) for m in messages]), "count tokens")

    def token_counter(self) -> Callable[[Sequence[Message]], int] | None:
        return self._counter

    def _generate(self, requests: Sequence[Request]) -> list[RawOutput]:
        ray = self._ray
        wired = [wire(request) for request in requests]
        per_replica = self.ray_config.in_flight_per_replica
        # More slices than replicas hold at once, so a fast replica takes more of them.
        todo = deque(enumerate(slices(len(wired), len(self._actors) * per_replica * 2)))
        answers: dict[int, list[RawOutput]] = {}
        pending: dict[Any, tuple[int, int]] = {}

        def send(replica: int) -> None:
            number, part = todo.popleft()
            pending[self._actors[replica].answer.remote(wired[part.start:part.stop])] = (replica, number)

        for replica in range(len(self._actors)):
            for _ in range(per_replica):
                if todo:
                    send(replica)
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            replica, number = pending.pop(done[0])
            answers[number] = self._get(done[0], "answer")
            if todo:
                send(replica)
        outputs = [output for number in sorted(answers) for output in answers[number]]
        if len(outputs) != len(wired):
            raise RuntimeError(f"replicas returned {len(outputs)} answers for {len(wired)} requests")
        return outputs

    def close(self) -> None:
        """Stop the replicas (their processes free the GPUs), and the private Ray instance when we started it."""
        ray = self.__dict__.get("_ray")
        if ray is None:
            return
        for actor in self.__dict__.pop("_actors", []):
            ray.kill(actor)
        if self.__dict__.pop("_owns_ray", False) and ray.is_initialized():
            ray.shutdown()
