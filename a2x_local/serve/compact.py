"""The text of the MCP tools' answers: what a model reads, compact and plain, not the structured content again.

A model reads a tool's text content; a client that wants fields reads `structuredContent` (the same views the HTTP
API answers with). So the text is a few short lines per hit or entry (name, type, id, score, category, a shortened
summary) with the cursor of the next page, and registry text is put on one line with control and bidi characters
made visible-safe (`one_line`), never as markup.
"""

from __future__ import annotations

import json
from typing import Any

from a2x_local.serve.views import NodeView, SearchResult, ServiceList, ServiceView, one_line

TEXT_SUMMARY_CHARS = 90   # a hit's summary in the text (the structured content keeps [serve] summary_chars)


def _more(cursor: str | None) -> str:
    return f' More: cursor="{cursor}".' if cursor else ""


def _quoted(text: str, limit: int = 80) -> str:
    return json.dumps(one_line(text, limit), ensure_ascii=False)


def _entry(name: str, kind: str, ident: str) -> str:
    return f"{name} ({kind})" if ident == name else f"{name} ({kind}, id {ident})"


def _named(name: str, ident: str) -> str:
    return name if ident == name else f"{name} (id {ident})"


def search_text(result: SearchResult) -> str:
    order = "ranked" if result.ranked else "chosen by the model"
    lines = [f"{len(result.hits)} hits for {_quoted(result.query)} with {result.method} ({order})."
             + _more(result.next_cursor)]
    for number, hit in enumerate(result.hits, start=1):
        entry = _entry(hit.name, hit.type, hit.service_id)
        if hit.has_schema:      # get_service gives its parameters: an agent can rule it in or out from there
            entry = f"{entry[:-1]}, schema)"
        line = f"{number}. {entry}"
        if hit.score is not None:
            line += f" {hit.score:.3f}"
        if hit.category:
            line += f" [{hit.category}]"
        lines.append(line)
        lines.append(f"   {one_line(hit.summary, TEXT_SUMMARY_CHARS)}")
    if result.cost:
        lines.append("Cost: " + ", ".join(f"{key} {value}" for key, value in result.cost.model_dump().items()))
    if not result.hits:
        lines.append("Nothing found: describe the need in other words, try another method, or browse_category.")
    return "\n".join(lines)


def node_text(view: NodeView) -> str:
    where = " › ".join(ref.name for ref in view.path)
    lines = [f"{view.name} (id {view.id}): {view.size} services under it" + (f"; in {where}" if where else "")
             + ".", f"  {one_line(view.description, 200)}"]
    if view.children_total:
        lines.append(f"Sub-categories ({len(view.children)} of {view.children_total}):")
        lines += [f"- {child.name} (id {child.id}): {child.size} services. {one_line(child.summary, 80)}"
                  for child in view.children]
    if view.services_total:
        lines.append(f"Services filed here ({len(view.services)} of {view.services_total}):")
        lines += [f"- {_entry(s.name, s.type, s.id)}: {one_line(s.summary, 80)}" for s in view.services]
    if view.next_cursor:
        lines.append(f'More: cursor="{view.next_cursor}".')
    return "\n".join(lines)


def services_text(listing: ServiceList) -> str:
    lines = [f"{len(listing.services)} of {listing.total} services." + _more(listing.next_cursor)]
    lines += [f"- {_entry(s.name, s.type, s.id)}: {one_line(s.summary, 80)}" for s in listing.services]
    return "\n".join(lines)


def service_text(view: ServiceView) -> str:
    placed = ["; ".join(" › ".join(ref.name for ref in path) for path in view.categories) or "not in the active tree"]
    lines = [f"{_entry(view.name, view.type, view.id)}. Filed under: {placed[0]}.",
             one_line(view.description, 4000)]
    if view.parameters_schema is not None:
        lines.append("Parameters (JSON Schema): " + json.dumps(view.parameters_schema, ensure_ascii=False,
                                                               separators=(",", ":")))
    if view.metadata:
        lines.append("Metadata: " + json.dumps(view.metadata, ensure_ascii=False, separators=(",", ":")))
    return "\n".join(lines)


def plan_text(plan: dict[str, Any]) -> str:
    steps = plan.get("steps", [])
    order = " then ".join("+".join(group) for group in plan.get("groups", []))
    lines = [f"Plan for {_quoted(plan.get('request', ''))}: {len(steps)} steps (split by {plan.get('decomposer')},"
             f" searched with {plan.get('method')}); order: {order or 'none'}."]
    for step in steps:
        after = f", after {', '.join(step['depends_on'])}" if step.get("depends_on") else ""
        if step.get("inputs_from"):
            after += f", takes the output of {', '.join(step['inputs_from'])}"
        line = f"{step['id']} (group {step.get('group')}{after}): {one_line(step.get('task', ''), 120)} -> "
        choice = step.get("choice")
        if choice:
            line += _named(choice["name"], choice["id"])
            if choice.get("named"):
                line += " (named in the request)"
            if "confidence" in choice or "confidence" in step:
                line += f" confidence {choice.get('confidence', step.get('confidence'))}"
            if step.get("low_confidence"):
                line += " (LOW CONFIDENCE: ask the user before running it)"
        else:
            line += f"no service ({step.get('error', 'nothing found')})"
        alternatives = [a["id"] for a in step.get("alternatives", [])]
        if alternatives:
            line += "; alternatives: " + ", ".join(alternatives)
        lines.append(line)
    lines += [f"Note: {one_line(note, 200)}" for note in plan.get("notes", [])]
    return "\n".join(lines)
