"""Our constraint language (JSON schema | regex | choice), mapped once per backend.

Each engine speaks a different dialect for the same three constraints: vLLM's ``StructuredOutputsParams``
fields, the OpenAI-compatible request body, and llguidance grammars (the transformers engine, and the
pre-flight check that keeps one malformed constraint from failing a whole vLLM batch).
"""

from __future__ import annotations

import copy
import json
from functools import lru_cache
from typing import Any, Literal, get_args

from a2x_local.llm.types import ChoiceConstraint, Constraint, JsonConstraint, RegexConstraint

# Structured-output backends vLLM accepts at engine level. "guidance" is the default: measured on vLLM 0.32 it is
# the only one that yields valid JSON, regex and choice answers reliably AND can emit a multi-item answer such as
# "2,5,7" ("outlines" never emits the comma; "xgrammar" lets JSON run into unbounded whitespace).
StructuredBackend = Literal["guidance", "xgrammar", "outlines", "auto"]
STRUCTURED_BACKENDS: tuple[str, ...] = get_args(StructuredBackend)


def constraint_key(constraint: Constraint) -> tuple[str, str]:
    """A hashable identity: two constraints with the same key accept exactly the same answers."""
    if isinstance(constraint, JsonConstraint):
        return ("json", json.dumps(constraint.schema()))
    if isinstance(constraint, RegexConstraint):
        return ("regex", constraint.pattern)
    if isinstance(constraint, ChoiceConstraint):
        return ("choice", json.dumps(list(constraint.options)))
    raise TypeError(f"unknown constraint {constraint!r}")


def closed_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with ``additionalProperties: false`` on every object that does not say otherwise.

    Pydantic leaves objects open; a random or weak model then invents extra keys that cost tokens and can run
    into the budget. vLLM's ``disable_additional_properties`` does the same on its side.
    """
    schema = copy.deepcopy(schema)

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "object" or "properties" in node:
                node.setdefault("additionalProperties", False)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(schema)
    return schema


def vllm_structured_outputs(constraint: Constraint) -> dict[str, Any]:
    """Keyword arguments for ``vllm.sampling_params.StructuredOutputsParams``."""
    if isinstance(constraint, JsonConstraint):
        return {"json": constraint.schema()}
    if isinstance(constraint, RegexConstraint):
        return {"regex": constraint.pattern}
    if isinstance(constraint, ChoiceConstraint):
        return {"choice": list(constraint.options)}
    raise TypeError(f"unknown constraint {constraint!r}")


def openai_body(constraint: Constraint) -> dict[str, Any]:
    """Fields of an OpenAI-compatible chat request that carry the constraint.

    JSON goes through the standard ``response_format``; regex and choice through vLLM's top-level
    ``structured_outputs`` field. The older ``guided_regex``/``guided_json`` fields are silently ignored by
    current vLLM servers (the answer comes back unconstrained), so they are never used.
    """
    if isinstance(constraint, JsonConstraint):
        return {"response_format": {"type": "json_schema", "json_schema": {
            "name": constraint.model.__name__, "schema": constraint.schema(), "strict": True}}}
    if isinstance(constraint, RegexConstraint):
        return {"structured_outputs": {"regex": constraint.pattern}}
    if isinstance(constraint, ChoiceConstraint):
        return {"structured_outputs": {"choice": list(constraint.options)}}
    raise TypeError(f"unknown constraint {constraint!r}")


def llguidance_grammar(constraint: Constraint) -> str:
    """The llguidance grammar for a constraint, with the same JSON settings as our vLLM default.

    JSON: no free whitespace and closed objects (vLLM's ``disable_any_whitespace`` and
    ``disable_additional_properties``); a random model otherwise pads answers with whitespace until the budget.
    """
    return _grammar_from_key(constraint_key(constraint))


def grammar_problem(constraint: Constraint) -> str | None:
    """Why llguidance cannot compile this constraint (a malformed regex, a broken schema), else None."""
    return _problem_from_key(constraint_key(constraint))


@lru_cache(maxsize=1024)
def _grammar_from_key(key: tuple[str, str]) -> str:
    import llguidance

    kind, spec = key
    if kind == "json":
        return llguidance.LLMatcher.grammar_from_json_schema(
            closed_schema(json.loads(spec)), defaults={"whitespace_flexible": False})
    if kind == "regex":
        return llguidance.grammar_from("regex", spec)
    return llguidance.grammar_from("choice", json.loads(spec))


@lru_cache(maxsize=4096)
def _problem_from_key(key: tuple[str, str]) -> str | None:
    import llguidance

    try:
        grammar = _grammar_from_key(key)
    except (ValueError, TypeError) as exc:
        return f"invalid {key[0]} constraint: {exc}"
    # validate_grammar answers "" when the grammar compiles, else the compiler's message.
    message = llguidance.LLMatcher.validate_grammar(grammar).strip()
    if not message:
        return None
    lines = [line.strip() for line in message.splitlines()]
    detail = [line for line in lines[1:] if line.startswith("error:")]
    return f"{key[0]} constraint does not compile: {' '.join(lines[:1] + detail)}"
