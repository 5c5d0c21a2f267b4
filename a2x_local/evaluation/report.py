"""Markdown for one run and the side-by-side table of several (`a2x-local eval compare`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from a2x_local.errors import UserError
from a2x_local.evaluation.harness import SUMMARY_FILE
from a2x_local.jsonfiles import read_json


def pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def render_report(summary: dict[str, Any], plot_name: str | None = None) -> str:
    """The Markdown report of one run."""
    queries = summary["queries"]
    k = summary.get("k")
    lines = [f"# Evaluation: {summary['label']}", ""]
    lines += [f"- queries: {summary['spec']['queries_file']} ({queries['selected']} selected, "
              f"{queries['scored']} scored)",
              f"- registry: {summary['registry']['path']} ({summary['registry']['services']} services, "
              f"fingerprint {summary['registry']['fingerprint'][:12]})",
              f"- answer size: {'top ' + str(k) if k else 'what the method returns'}; "
              f"wall time {num(summary.get('wall_seconds'))} s", ""]
    lines += _table(
        ["hit", "comp", "recall", "precision", "F1", "tokens/query (prompt + completion)", "calls/query",
         "candidates shown/query", "latency p50 / p90 (ms)"],
        [[pct(summary["hit_rate"]), pct(summary.get("comp")), pct(summary["recall"]), pct(summary["precision"]),
          pct(summary["f1"]),
          f"{num(summary['tokens_per_query'], 0)} ({num(summary['prompt_tokens_per_query'], 0)} + "
          f"{num(summary['completion_tokens_per_query'], 0)})",
          num(summary["calls_per_query"], 2), num(summary["candidates_shown_per_query"]),
          f"{num(1000 * summary['latency_s']['p50'])} / {num(1000 * summary['latency_s']['p90'])}"]])
    ranked = summary.get("ranked")
    if ranked:
        cuts = list(ranked["at"].items())
        lines += ["", "## Ranked metrics", ""]
        header = ["", *(f"@{label}" + (f" (k={cut['k']})" if label.endswith("%") else "") for label, cut in cuts),
                  "MRR", "nDCG@10"]
        lines += _table(header, [
            ["hit", *(pct(cut["hit"]) for _, cut in cuts), pct(ranked["mrr"]), pct(ranked["ndcg@10"])],
            ["recall", *(pct(cut["recall"]) for _, cut in cuts), "", ""],
            ["comp", *(pct(cut.get("comp")) for _, cut in cuts), "", ""],
        ])
    lines += _size_lines(summary)
    lines += _decomposition_lines(summary.get("decomposition"))
    lines += _decision_lines(summary)
    notes = []
    if queries["skipped_no_correct_in_registry"]:
        notes.append(f"{len(queries['skipped_no_correct_in_registry'])} queries have no correct service in the "
                     "registry; they were not run and are left out of every average: "
                     + ", ".join(queries["skipped_no_correct_in_registry"][:20]))
    if queries["with_missing_tools"]:
        policy = summary["spec"]["missing_tools"]
        notes.append(f"{queries['with_missing_tools']} queries name {len(queries['missing_tool_ids'])} services "
                     f"missing from the registry (policy '{policy}': "
                     + ("scored only against the services that exist)" if policy == "exclude"
                        else "the missing ones count as misses)"))
    if queries["errors"]:
        notes.append(f"{queries['errors']} queries ended in an error (scored as answered; a rerun retries them)")
    if summary.get("capped_answers"):
        notes.append(f"{summary['capped_answers']} model answers in {summary['queries_with_capped_answers']} queries"
                     " filled a cap smaller than the list offered ([search] max_children_selected /"
                     " max_services_selected): items beyond the cap may have been cut")
    notes += guard_notes(summary)
    if notes:
        lines += ["", "## Notes", "", *(f"- {note}" for note in notes)]
    if plot_name:
        lines += ["", f"![hit and recall versus k]({plot_name})"]
    return "\n".join(lines) + "\n"


def position_verdict(bias: dict[str, Any]) -> str:
    """One plain sentence on how the model chose among the options shown."""
    numbers = (f"it took the first option shown in {pct(bias['first_option_share'])}% of its {bias['choices']:,}"
               f" choices, where a choice blind to position would take it in {pct(bias['uniform_share'])}%")
    favoured = bias.get("favoured_position", 1)
    if favoured != 1:
        numbers += (f"; option {favoured} in {pct(bias['favoured_share'])}%, where a blind choice would take it in"
                    f" {pct(bias['favoured_blind_share'])}%")
    if bias["by_position"]:
        return (f"**The model is choosing by position, not by meaning**: {numbers}. Its hits say little about the"
                " tree or the request; `[search] option_order = \"shuffled\"` at least spreads its choices over the"
                " branches (docs/evaluation.md, Position bias).")
    if bias["choices"] < bias["rule"]["min_choices"]:
        return f"Too few choices to tell whether the model chooses by position: {numbers}."
    return f"The model does not choose by position (by the rule of docs/evaluation.md): {numbers}."


def guard_notes(summary: dict[str, Any]) -> list[str]:
    """Notes on what held the model in check: over-selections, budget cuts, answers cut off at their budget."""
    notes = []
    if summary.get("overselected_answers"):
        notes.append(f"{summary['overselected_answers']} descent answers in"
                     f" {summary['queries_with_overselected_answers']} queries chose too many of a node's options"
                     " ([search] overselect_share): only overselect_keep of each were expanded, those the retrieval"
                     " ranking (else the size) put first")
    if summary.get("budget_cut_requests"):
        notes.append(f"{summary['budget_cut_requests']} model requests of {summary['queries_over_budget']} queries"
                     " were not sent: the query's budget ([search] max_calls_per_query, max_prompt_tokens_per_query)"
                     " was spent")
    if summary.get("truncated_answers"):
        notes.append(f"{summary['truncated_answers']} answers were cut off at their token budget (a model that"
                     " writes on; each was retried once with a larger budget)")
    return notes


def decision_notes(summary: dict[str, Any]) -> list[str]:
    """What a terminal shows under a run's numbers: how the model chose, and what held it in check."""
    bias = summary.get("position_bias")
    return ([position_verdict(bias).replace("**", "")] if bias else []) + guard_notes(summary)


def _decision_lines(summary: dict[str, Any]) -> list[str]:
    """How the model chose: the first option's share against a blind choice's, and the verdict."""
    bias = summary.get("position_bias")
    if not bias:
        return []
    return ["", "## Model decisions", "",
            *_table(["choices", "took the first option %", "blind to position %", "favoured position (% / blind %)",
                     "excess", "over-selected", "budget cuts", "cut off"],
                    [[f"{bias['choices']:,}", pct(bias["first_option_share"]), pct(bias["uniform_share"]),
                      f"{bias.get('favoured_position', 1)} ({pct(bias.get('favoured_share', 0))} /"
                      f" {pct(bias.get('favoured_blind_share', 0))})",
                      num(bias["excess"], 2), str(summary.get("overselected_answers", 0)),
                      str(summary.get("budget_cut_requests", 0)), str(summary.get("truncated_answers", 0))]]),
            "", position_verdict(bias)]


def _size_lines(summary: dict[str, Any]) -> list[str]:
    """hit / recall / COMP for queries with one correct service and with two or more, at every cut-off."""
    groups = summary.get("by_size")
    if not groups:
        return []
    lines = ["", "## By correct-set size", "",
             "COMP = the whole correct set returned (COMP@k: within the top k). Ranked runs return k services each, "
             "so runs compared at the same cut-off are compared at the same budget.", ""]
    cuts = list(groups["single"].get("at", {}))
    header = ["correct services", "queries", "hit", "recall", "comp",
              *(f"{metric}@{label}" for label in cuts for metric in ("hit", "recall", "comp"))]
    rows = []
    for name, title in (("single", "one"), ("multi", "two or more")):
        group = groups[name]
        rows.append([title, str(group["queries"]), pct(group["hit"]), pct(group["recall"]), pct(group["comp"]),
                     *(pct(group["at"][label][metric]) for label in cuts for metric in ("hit", "recall", "comp"))])
    return lines + _table(header, rows)


def _decomposition_lines(block: dict[str, Any] | None) -> list[str]:
    if not block:
        return []
    plan, sizes = block["plan"], block["steps_per_query_by_size"]
    lines = ["", "## Decomposition", "",
             f"- steps per query {num(block['steps_per_query'], 2)} (one correct service: {num(sizes['single'], 2)};"
             f" two or more: {num(sizes['multi'], 2)}); {pct(block['multi_step_share'])}% of queries split",
             f"- the plan's own services ({num(plan['services_per_query'], 2)} per query): hit {pct(plan['hit'])}, "
             f"recall {pct(plan['recall'])}, comp {pct(plan['comp'])}",
             f"- SAD applied to {block['sad_applied']} queries; {block['sad_copy_rejected']} re-decompositions "
             "refused as copies of service names"]
    reference = block.get("reference")
    if reference:
        hits = ", ".join(f"@{k} {pct(value)}" for k, value in reference["step_hit"].items())
        catr = ", ".join(f"@{k} {pct(value)}" for k, value in reference.get("catr", {}).items())
        lines.append(f"- against the reference steps of {reference['queries']} queries: DA {pct(reference['da'])}, "
                     f"DA±1 {pct(reference['da_pm1'])}; per-step hit {hits} ({reference['steps_scored']} steps)"
                     + (f"; CatR {catr} (steps matched by position, each service its own category)" if catr else ""))
    return lines


def load_summary(run_dir: Path) -> dict[str, Any]:
    path = Path(run_dir) / SUMMARY_FILE
    if not Path(run_dir).is_dir():
        raise UserError(f"{run_dir}: no such run folder",
                        hint="give the folder `a2x-local eval` wrote (it prints it; see runs/)")
    if not path.is_file():
        raise UserError(f"{run_dir}: not a finished run (no {SUMMARY_FILE})",
                        hint="rerun the same `a2x-local eval` command to finish it")
    return read_json(path, hint="the run's summary is damaged: rerun the same `a2x-local eval` command with --fresh")


def unique_labels(summaries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Runs with the same label (same method on two registries, say) get their folder name added."""
    counts: dict[str, int] = {}
    for summary in summaries:
        counts[summary["label"]] = counts.get(summary["label"], 0) + 1
    return [{**s, "label": f"{s['label']} [{Path(s['run_dir']).name}]"} if counts[s["label"]] > 1 else s
            for s in summaries]


COMPARE_COLUMNS = ("run", "queries", "k", "hit", "recall", "precision", "F1", "hit@1", "hit@5", "hit@10",
                   "hit@50", "recall@10", "recall@50", "comp@10", "multi comp@10", "MRR", "nDCG@10", "tokens/q",
                   "calls/q", "p50 ms")


def compare_row(summary: dict[str, Any]) -> dict[str, str]:
    at = summary.get("ranked", {}).get("at", {}) if summary.get("ranked") else {}
    ranked = summary.get("ranked") or {}

    def cut(label: str, metric: str) -> str:
        return pct(at[label].get(metric)) if label in at else "-"

    multi = (summary.get("by_size") or {}).get("multi") or {}
    multi_comp = pct(multi["at"]["10"]["comp"]) if multi.get("queries") and "10" in multi.get("at", {}) else "-"
    return {
        "run": summary["label"], "queries": str(summary["queries"]["scored"]), "k": str(summary.get("k") or "-"),
        "hit": pct(summary["hit_rate"]), "recall": pct(summary["recall"]), "precision": pct(summary["precision"]),
        "F1": pct(summary["f1"]), "hit@1": cut("1", "hit"), "hit@5": cut("5", "hit"), "hit@10": cut("10", "hit"),
        "hit@50": cut("50", "hit"), "recall@10": cut("10", "recall"), "recall@50": cut("50", "recall"),
        "comp@10": cut("10", "comp"), "multi comp@10": multi_comp, "MRR": pct(ranked.get("mrr")),
        "nDCG@10": pct(ranked.get("ndcg@10")),
        "tokens/q": num(summary["tokens_per_query"], 0), "calls/q": num(summary["calls_per_query"], 2),
        "p50 ms": num(1000 * summary["latency_s"]["p50"]),
    }


def _distinct(summaries: Sequence[dict[str, Any]], value: Any) -> list[tuple[str, Any]]:
    seen = [(summary["label"], value(summary)) for summary in summaries]
    return seen if len({repr(v) for _, v in seen}) > 1 else []


def comparability(summaries: Sequence[dict[str, Any]]) -> list[str]:
    """Why runs put side by side do not measure the same thing: a different k, query set or registry. Empty when
    they do. A k=5 run on 100 queries beside a k=10 run on 864 reads as a comparison and is none."""
    notes = []
    ks = _distinct([s for s in summaries if s.get("k")], lambda s: s["k"])
    if ks:
        listed = ", ".join(f"{label}: k={k}" for label, k in ks)
        notes.append(f"the runs cut at different k ({listed}): hit, recall, precision and F1 are each at its own k; "
                     "compare the hit@N and recall@N columns, or rerun with the same -k")
    queries = _distinct(summaries, lambda s: (s.get("spec", {}).get("queries_sha256"), s["queries"]["scored"]))
    if queries:
        listed = ", ".join(f"{label}: {scored} queries" + (f" of {str(sha)[:8]}" if sha else "")
                           for label, (sha, scored) in queries)
        notes.append(f"the runs scored different query sets ({listed}): their numbers are not comparable; rerun on "
                     "the same file with the same --limit")
    registries = _distinct(summaries, lambda s: (s.get("registry") or {}).get("fingerprint"))
    if registries:
        listed = ", ".join(f"{label}: {str(fingerprint)[:12]}" for label, fingerprint in registries)
        notes.append(f"the runs searched different registries ({listed})")
    return notes


def render_compare(summaries: Sequence[dict[str, Any]], plots: Sequence[str] = ()) -> str:
    rows = [compare_row(summary) for summary in summaries]
    lines = ["# Comparison", "", *_table(COMPARE_COLUMNS, [[row[c] for c in COMPARE_COLUMNS] for row in rows])]
    notes = comparability(summaries)
    if notes:
        lines += ["", "**Not comparable:**", "", *(f"- {note}" for note in notes)]
    lines += ["", *(f"![{Path(name).stem}]({name})" for name in plots)]
    return "\n".join(lines) + "\n"
