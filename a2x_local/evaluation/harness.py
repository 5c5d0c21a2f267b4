"""Run one search method over a query file and keep every answer: resumable, batch-first, method-agnostic.

Files in a run folder: ``run.json`` (what was run: method, options, query file, registry), ``results.jsonl``
(one line per finished query, appended after each batch), then ``summary.json``, ``report.md`` and the plots.
A rerun with the same settings skips the queries already in ``results.jsonl``; queries that ended in an error are
tried again.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from a2x_local.db import connect
from a2x_local.errors import InputError, UserError
from a2x_local.evaluation.metrics import dedupe, score_query
from a2x_local.evaluation.queries import Query
from a2x_local.evaluation.summary import ranking_depth, summarize
from a2x_local.hashing import stable_hash
from a2x_local.jsonfiles import parse_json, read_bytes, read_json, read_text
from a2x_local.outfiles import open_append, write_output
from a2x_local.registry import Registry
from a2x_local.search import SearchAnswer, SearchCost, SearchMethod, SearchRequest
from a2x_local.settings import SectionConfig

RUN_FILE, RESULTS_FILE, SUMMARY_FILE, REPORT_FILE = "run.json", "results.jsonl", "summary.json", "report.md"


class EvaluationConfig(SectionConfig):
    """The `[evaluation]` table; the packaged default.toml says what each key means."""

    section: ClassVar[str] = "evaluation"

    batch_size: int = Field(ge=1, le=100_000)
    ks: list[Annotated[int, Field(ge=1, le=100_000)]] = Field(min_length=1, max_length=100)
    percent_ks: list[Annotated[float, Field(gt=0, le=1)]] = Field(max_length=100)
    missing_tools: Literal["exclude", "strict"]
    runs_dir: str


@dataclass(frozen=True)
class RegistryInfo:
    path: str
    fingerprint: str
    ids: frozenset[str]

    @property
    def size(self) -> int:
        return len(self.ids)


def registry_info(db_path: Path, *, lock_timeout_s: float | None = None) -> RegistryInfo:
    """Ids and fingerprint of the registry under evaluation; an empty registry cannot be evaluated."""
    with connect(db_path, lock_timeout_s=lock_timeout_s, mode="read") as con:
        registry = Registry(con)
        ids, fingerprint = frozenset(registry.ids()), registry.fingerprint()
    if not ids:
        raise UserError(f"{db_path}: the registry is empty, there is nothing to evaluate",
                        hint="load services first: a2x-local ingest PATH")
    return RegistryInfo(str(db_path), fingerprint, ids)


@dataclass(frozen=True)
class RunSpec:
    """What makes two runs the same run: a rerun resumes only when all of this matches."""

    method: str
    options: dict[str, Any]
    mode: str | None
    k: int
    queries_file: str
    queries_sha256: str
    registry_fingerprint: str
    missing_tools: str
    method_info: dict[str, Any]     # what the method says it is (model, index, engine): part of the identity

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @property
    def label(self) -> str:
        parts = [self.method, *(f"{key}={value}" for key, value in sorted(self.options.items()))]
        if self.mode:
            parts.append(f"mode={self.mode}")
        return " ".join(parts)

    def default_folder(self, runs_dir: Path) -> Path:
        """``runs/<queries>-<method>-<hash>``: the same settings land in the same folder, so a rerun resumes."""
        return runs_dir / f"{Path(self.queries_file).stem}-{self.method}-{stable_hash(self.to_dict(), 8)}"


def file_sha256(path: Path) -> str:
    """The hash of a query file, which names the run's queries. The file was read within the limits already; here
    only a regular file is read (a device or a pipe swapped in meanwhile is refused)."""
    return hashlib.sha256(read_bytes(Path(path), sys.maxsize, what="query")).hexdigest()


def _write_atomic(path: Path, text: str) -> None:
    write_output(path, text, what="run file")


def _read_results(path: Path) -> tuple[list[dict[str, Any]], bool]:
    """Finished records, and whether the file needs rewriting (a torn last line or records to retry)."""
    if not path.exists():
        return [], False
    lines = read_text(path, empty_ok=True).splitlines()
    records, dirty = [], False
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = parse_json(line, None, str(path), line=number, hint="rerun with --fresh to start this run over")
        except InputError as exc:
            if number == len(lines):  # a write cut off by a crash: that query simply runs again
                dirty = True
                continue
            raise UserError(f"{exc.message}; the run folder is damaged", hint=exc.hint) from exc
        if record.get("error"):
            dirty = True
            continue
        records.append(record)
    return records, dirty


class Evaluation:
    """One run folder: its spec, its finished records, and the loop that adds the rest."""

    def __init__(self, out_dir: Path, spec: RunSpec, registry: RegistryInfo, config: EvaluationConfig, *,
                 fresh: bool = False) -> None:
        self.out_dir = Path(out_dir)
        self.spec = spec
        self.registry = registry
        self.config = config
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.results_path = self.out_dir / RESULTS_FILE
        if fresh:
            for name in (RUN_FILE, RESULTS_FILE, SUMMARY_FILE, REPORT_FILE):
                (self.out_dir / name).unlink(missing_ok=True)
        self._check_or_write_spec()
        records, dirty = _read_results(self.results_path)
        self.done: dict[str, dict[str, Any]] = {record["id"]: record for record in records}
        if dirty:
            _write_atomic(self.results_path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))

    def _check_or_write_spec(self) -> None:
        run_file = self.out_dir / RUN_FILE
        wanted = self.spec.to_dict()
        if run_file.exists():
            try:
                stored = read_json(run_file).get("spec", {})
            except (InputError, AttributeError) as exc:
                raise UserError(f"{run_file}: damaged run description",
                                hint="rerun with --fresh to start this run over") from exc
            if stored != json.loads(json.dumps(wanted)):
                differing = sorted(key for key in wanted.keys() | stored.keys() if stored.get(key) != wanted.get(key))
                raise UserError(f"{self.out_dir} holds a run with other settings ({', '.join(differing)} differ)",
                                hint="use another --out, or --fresh to replace that run")
            return
        _write_atomic(run_file, json.dumps({"spec": wanted, "registry_path": self.registry.path,
                                            "registry_size": self.registry.size}, indent=2))

    def depth(self, ranked: bool) -> int:
        if not ranked:
            return self.spec.k
        return ranking_depth(self.spec.k, self.config.ks, self.config.percent_ks, self.registry.size)

    def scored_correct(self, query: Query) -> tuple[list[str], list[str]]:
        """(the correct ids scored against, the correct ids missing from the registry)."""
        missing = [tool for tool in query.correct if tool not in self.registry.ids]
        if self.config.missing_tools == "strict":
            return list(query.correct), missing
        return [tool for tool in query.correct if tool in self.registry.ids], missing

    def record(self, query: Query, answer: SearchAnswer | None, ranked: bool, latency: float) -> dict[str, Any]:
        scored, missing = self.scored_correct(query)
        base = {"id": query.id, "query": query.query, "correct": list(query.correct), "scored": scored,
                "missing": missing}
        if query.steps is not None:
            base["reference_steps"] = [list(step) for step in query.steps]
        if answer is None:
            return {**base, "skipped": "no correct service in the registry", "returned": [], "ranking": [],
                    "hit": False, "recall": 0.0, "precision": 0.0, "comp": False,
                    **asdict(SearchCost()), "latency_s": 0.0, "error": None}
        ranking = dedupe(answer.ids)
        returned = ranking[: self.spec.k] if ranked else ranking
        score = score_query(returned, scored)
        composed = (answer.trace or {}).get("compose")
        if isinstance(composed, dict):  # a method that decomposes: what its steps found, for the step metrics
            base["compose"] = composed
        return {**base, "returned": returned, "ranking": ranking if ranked else [],
                "scores": [hit.score for hit in answer.hits[: len(returned)]] if ranked else [],
                "hit": score.hit, "recall": score.recall, "precision": score.precision, "comp": score.complete,
                **asdict(answer.cost), "latency_s": answer.seconds or latency, "error": answer.error}

    def run(self, method: SearchMethod, queries: Sequence[Query],
            progress: Callable[[int], None] | None = None) -> list[dict[str, Any]]:
        """Answer every query not yet finished, batch by batch; return the records of ``queries`` in order."""
        ranked = method.ranked
        depth = self.depth(ranked)
        todo = [query for query in queries if query.id not in self.done]
        with open_append(self.results_path, what="run's results") as out:
            # Queries with nothing to find are recorded without asking the method (an LLM call would be wasted).
            unanswerable, answerable = [], []
            for query in todo:
                (answerable if self.scored_correct(query)[0] else unanswerable).append(query)
            self._append(out, [self.record(query, None, ranked, 0.0) for query in unanswerable])
            if progress and unanswerable:
                progress(len(unanswerable))
            for start in range(0, len(answerable), self.config.batch_size):
                batch = answerable[start:start + self.config.batch_size]
                requests = [SearchRequest(query.query, k=depth, mode=self.spec.mode) for query in batch]
                started = time.perf_counter()
                answers = method.search_batch(requests)
                latency = (time.perf_counter() - started) / len(batch)
                if len(answers) != len(batch):
                    raise RuntimeError(f"method '{self.spec.method}' answered {len(answers)} of {len(batch)} queries")
                self._append(out, [self.record(q, a, ranked, latency) for q, a in zip(batch, answers, strict=True)])
                if progress:
                    progress(len(batch))
        return [self.done[query.id] for query in queries]

    def _append(self, out: Any, records: list[dict[str, Any]]) -> None:
        if not records:
            return
        out.write("".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records))
        out.flush()
        os.fsync(out.fileno())
        for record in records:
            self.done[record["id"]] = record

    def summary(self, records: Sequence[dict[str, Any]], *, ranked: bool, extra: dict[str, Any]) -> dict[str, Any]:
        numbers = summarize(records, ranked=ranked, k=self.spec.k, registry_size=self.registry.size,
                            ks=self.config.ks, percent_ks=self.config.percent_ks)
        label = f"{self.spec.label} @{self.spec.k}" if ranked else self.spec.label
        return {"label": label, "run_dir": str(self.out_dir), "spec": self.spec.to_dict(),
                "registry": {"path": self.registry.path, "services": self.registry.size,
                                               "fingerprint": self.registry.fingerprint},
                **extra, **numbers}
