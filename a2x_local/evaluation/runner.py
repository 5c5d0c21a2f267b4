"""One evaluation from start to files: plan the run folder, run the harness, write summary, report and plot."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2x_local.evaluation.harness import (
    REPORT_FILE,
    SUMMARY_FILE,
    Evaluation,
    EvaluationConfig,
    RegistryInfo,
    RunSpec,
    file_sha256,
)
from a2x_local.evaluation.plots import FEATURE as PLOTS_FEATURE
from a2x_local.evaluation.plots import plot_compare, plot_run
from a2x_local.evaluation.queries import Query
from a2x_local.evaluation.report import load_summary, render_compare, render_report, unique_labels
from a2x_local.extras import check
from a2x_local.outfiles import write_output
from a2x_local.search import SearchMethod

RUN_PLOT = "hit_recall_vs_k.png"


def check_plots() -> None:
    """Stop before a run when plots are wanted and matplotlib is missing (the error names the extra)."""
    check("matplotlib", feature=PLOTS_FEATURE)


def describe_method(method: SearchMethod, name: str) -> dict[str, Any]:
    """The method's own description (model, index, engine), under the name it was asked for; JSON-safe."""
    info = {"method": name, **method.describe()}
    return json.loads(json.dumps(info, default=str))


@dataclass(frozen=True)
class RunPlan:
    spec: RunSpec
    out_dir: Path


def plan_run(*, method: str, options: dict[str, Any], mode: str | None, k: int, queries_file: Path,
             registry: RegistryInfo, config: EvaluationConfig, out: Path | None = None,
             method_info: dict[str, Any] | None = None) -> RunPlan:
    """The run's identity and folder (``out``, else a folder under ``runs_dir`` named after the settings)."""
    spec = RunSpec(method=method, options={key: v for key, v in sorted(options.items()) if v is not None},
                   mode=mode, k=k, queries_file=str(Path(queries_file).resolve()),
                   queries_sha256=file_sha256(queries_file), registry_fingerprint=registry.fingerprint,
                   missing_tools=config.missing_tools, method_info=method_info or {"method": method})
    return RunPlan(spec, Path(out) if out else spec.default_folder(Path(config.runs_dir)))


def run_evaluation(method: SearchMethod, queries: Sequence[Query], plan: RunPlan, registry: RegistryInfo,
                   config: EvaluationConfig, *, limit: int | None = None, fresh: bool = False,
                   progress: Callable[[int], None] | None = None, plots: bool = True) -> dict[str, Any]:
    """Answer the (first ``limit``) queries not yet done, then write summary.json, report.md and (``plots``) the
    plot. Callers check for matplotlib before the run (`plots_available`), so a missing extra costs no work."""
    evaluation = Evaluation(plan.out_dir, plan.spec, registry, config, fresh=fresh)
    selected = list(queries[:limit] if limit else queries)
    already = sum(1 for query in selected if query.id in evaluation.done)
    started = time.perf_counter()
    records = evaluation.run(method, selected, progress)
    ranked = method.ranked
    extra = {
        "wall_seconds": time.perf_counter() - started,
        "resumed_queries": already,
        "limit": limit,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    summary = evaluation.summary(records, ranked=ranked, extra=extra)
    out = plan.out_dir
    plot = None
    if plots:
        plot = plot_run(summary, out / RUN_PLOT)
    write_output(out / SUMMARY_FILE, json.dumps(summary, indent=2, ensure_ascii=False, default=str), what="summary")
    write_output(out / REPORT_FILE, render_report(summary, plot.name if plot else None), what="report")
    return summary


def compare_runs(run_dirs: Sequence[Path], out: Path | None = None, *,
                 plots: bool = True) -> tuple[list[dict[str, Any]], list[Path]]:
    """Summaries of finished runs (labels made unique); with ``out``, also compare.md and (``plots``) the plots."""
    summaries = unique_labels([load_summary(Path(run_dir)) for run_dir in run_dirs])
    files: list[Path] = []
    if out is not None:
        out = Path(out)
        drawn: list[Path] = []
        if plots:
            drawn = plot_compare(summaries, out)
        report = out / "compare.md"
        write_output(report, render_compare(summaries, [p.name for p in drawn]), what="comparison")
        files = [report, *drawn]
    return summaries, files
