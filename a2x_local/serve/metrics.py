"""The server's numbers in the Prometheus text format (`/metrics`), kept with the official client library.

Requests and their latency by route, searches by method and outcome, how many queries shared each search batch,
how many prompts shared each engine round, and the model's tokens and calls by call type (read from the engine's
own accounting when scraped, so they add up to what `--json` runs report).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from a2x_local.llm import Usage

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


class _ModelCollector:
    """Tokens, calls, failures and rounds of the engine, read at scrape time; the registry's size and tree."""

    def __init__(self, usage: Callable[[], Usage | None], state: Callable[[], dict[str, Any]]) -> None:
        self.usage = usage
        self.state = state

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        usage = self.usage()
        if usage is not None:
            tokens = CounterMetricFamily("a2x_model_tokens", "Model tokens by kind and call type",
                                         labels=["kind", "call_type"])
            calls = CounterMetricFamily("a2x_model_calls", "Model calls (retries included) by call type",
                                        labels=["call_type"])
            failures = CounterMetricFamily("a2x_model_failures", "Model answers that never validated, by call type",
                                           labels=["call_type"])
            for label, stats in sorted(usage.by_label.items()):
                tokens.add_metric(["prompt", label], stats.prompt_tokens)
                tokens.add_metric(["completion", label], stats.completion_tokens)
                calls.add_metric([label], stats.calls)
                failures.add_metric([label], stats.failures)
            yield tokens
            yield calls
            yield failures
            yield CounterMetricFamily("a2x_engine_rounds", "Engine calls (sequential rounds)", value=usage.rounds)
        state = self.state()
        yield GaugeMetricFamily("a2x_registry_services", "Services in the served snapshot",
                                value=state.get("services", 0))
        yield GaugeMetricFamily("a2x_active_tree_build_id", "Build id of the served tree (-1: none)",
                                value=state.get("build_id") if state.get("build_id") is not None else -1)
        yield GaugeMetricFamily("a2x_snapshot_generation", "Reloads of the registry since start",
                                value=state.get("generation", 0))


class Metrics:
    """Every metric of one server (its own registry, so several servers in one process never mix)."""

    def __init__(self, usage: Callable[[], Usage | None], state: Callable[[], dict[str, Any]]) -> None:
        disable_created_metrics()  # the *_created series (process-wide) only double the output
        self.registry = CollectorRegistry()
        self.requests = Counter("a2x_requests", "Requests answered, by route and HTTP status",
                                ["route", "status"], registry=self.registry)
        self.latency = Histogram("a2x_request_seconds", "Request latency by route", ["route"],
                                 buckets=LATENCY_BUCKETS, registry=self.registry)
        self.searches = Counter("a2x_searches", "Searches by method and outcome (ok, error, timeout)",
                                ["method", "outcome"], registry=self.registry)
        self.search_batch = Histogram("a2x_search_batch_size", "Queries answered by one search batch", ["method"],
                                      buckets=SIZE_BUCKETS, registry=self.registry)
        self.engine_batch = Histogram("a2x_engine_batch_size", "Prompts sent in one engine round",
                                      buckets=SIZE_BUCKETS, registry=self.registry)
        self.registry.register(_ModelCollector(usage, state))

    def observe_request(self, route: str, status: int, seconds: float) -> None:
        self.requests.labels(route, str(status)).inc()
        self.latency.labels(route).observe(seconds)

    def render(self) -> tuple[bytes, str]:
        """The exposition text and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_PLAIN_0_0_4
