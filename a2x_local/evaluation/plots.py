"""PNG plots of runs (matplotlib, Agg backend: no display needed), imported only when a plot is drawn."""

from __future__ import annotations

import io
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from a2x_local.extras import require
from a2x_local.outfiles import write_output

FEATURE = "plots (the [plots] extra; `--no-plots` skips them)"


@cache
def _pyplot() -> Any:
    matplotlib = require("matplotlib", feature=FEATURE)
    matplotlib.use("Agg")
    return require("matplotlib.pyplot", feature=FEATURE)  # after the backend is chosen


def _curve(summary: dict[str, Any], metric: str) -> tuple[list[int], list[float]]:
    points = sorted((cut["k"], cut[metric]) for cut in summary.get("ranked", {}).get("at", {}).values())
    return [k for k, _ in points], [100 * value for _, value in points]


def _finish(ax: Any, title: str, path: Path) -> Path:
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.figure.tight_layout()
    buffer = io.BytesIO()
    ax.figure.savefig(buffer, format="png", dpi=120)
    write_output(path, buffer.getvalue(), what="plot")
    _pyplot().close(ax.figure)
    return path


def plot_run(summary: dict[str, Any], path: Path) -> Path | None:
    """Hit rate and recall versus k for one ranked run (None for an unranked run: there is no curve)."""
    if not summary.get("ranked"):
        return None
    _, ax = _pyplot().subplots(figsize=(6, 4))
    for metric in ("hit", "recall"):
        ks, values = _curve(summary, metric)
        ax.plot(ks, values, marker="o", label=metric)
    ax.set_xscale("log")
    ax.set_xlabel("k (services returned)")
    ax.set_ylabel("%")
    return _finish(ax, summary["label"], path)


def plot_versus_k(summaries: Sequence[dict[str, Any]], metric: str, path: Path) -> Path:
    """One line per ranked run; an unranked run is one point at its mean answer size."""
    _, ax = _pyplot().subplots(figsize=(7, 4.5))
    for summary in summaries:
        if summary.get("ranked"):
            ks, values = _curve(summary, metric)
            ax.plot(ks, values, marker="o", label=summary["label"])
        else:
            value = summary["hit_rate"] if metric == "hit" else summary["recall"]
            ax.scatter([max(summary["returned_per_query"], 1)], [100 * value], marker="*", s=120,
                       label=summary["label"])
    ax.set_xscale("log")
    ax.set_xlabel("k (services returned)")
    ax.set_ylabel(f"{metric} %")
    return _finish(ax, f"{metric} versus k", path)


def plot_tokens_versus_hit(summaries: Sequence[dict[str, Any]], path: Path) -> Path:
    """Cost against quality: model tokens per query (prompt + completion) versus hit rate, one point per run."""
    _, ax = _pyplot().subplots(figsize=(7, 4.5))
    for summary in summaries:
        x, y = summary["tokens_per_query"], 100 * summary["hit_rate"]
        ax.scatter([x], [y], s=60, label=summary["label"])
        ax.annotate(summary["label"], (x, y), textcoords="offset points", xytext=(6, 4), fontsize=7)
    most = max((s["tokens_per_query"] for s in summaries), default=0)
    if most > 1000:
        ax.set_xscale("symlog", linthresh=100)
    ax.set_xlim(left=-1 if most > 1000 else -0.05 * max(most, 100), right=max(most, 100) * 1.3)
    ax.set_xlabel("tokens per query (prompt + completion)")
    ax.set_ylabel("hit rate % (at each run's k)")
    return _finish(ax, "tokens per query versus hit rate", path)


def plot_compare(summaries: Sequence[dict[str, Any]], folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    return [
        plot_versus_k(summaries, "hit", folder / "hit_vs_k.png"),
        plot_versus_k(summaries, "recall", folder / "recall_vs_k.png"),
        plot_tokens_versus_hit(summaries, folder / "tokens_vs_hit.png"),
    ]
