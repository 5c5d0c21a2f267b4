"""The LLM search prompts through the shared `PromptBook`: one file per call type, and per mode separate descent and
selection instructions (get_important leans to recall while descending and is strict while selecting).

The system part depends only on the call type, the mode and the answer form; the user part puts the node's list
before the query, so every query at the same node shares that prefix in an engine's cache. The other layout,
query first, exists to measure what this one saves.
"""

from __future__ import annotations

from a2x_local.prompts import PromptBook
from a2x_local.search.types import MODES

CALL_TYPES = ("descend", "select", "full")
# Where every call type's user part puts the request: its last paragraph (the prompt files say so).
REQUEST_MARK = "\n\nRequest: "
ANSWERS = ("answer_categories", "answer_category", "answer_services", "answer_service", "answer_capped")

PROMPTS = PromptBook("a2x_local.search.llm", call_types=CALL_TYPES,
                     fragments=(*(f"{step}_{mode}" for step in ("descend", "select") for mode in MODES), *ANSWERS,
                                "other_services", "across_languages"))


def prompt_hash() -> str:
    """SHA-256 over the search prompts: recorded with evaluation runs, so a changed prompt is a changed method."""
    return PROMPTS.hash()


def answer_form(call_type: str, mode: str, cap: int | None) -> str:
    """What the answer must be: one position in get_one, else several (at most ``cap``, most relevant first)."""
    noun = "category" if call_type == "descend" else "service"
    if mode == "get_one":
        return PROMPTS.fragment(f"answer_{noun}")
    text = PROMPTS.fragment("answer_categories" if noun == "category" else "answer_services")
    if cap:
        text += "; " + PROMPTS.fill("answer_capped", cap=cap)
    return text


def render(call_type: str, mode: str, *, cap: int | None = None, layout: str = "query_last",
           across_languages: bool = True, **user: object) -> list[dict[str, str]]:
    """Chat messages for one request: system from (call type, mode, answer form), user from ``user``.

    ``cap`` is the most positions the answer may hold when that is fewer than the items offered (None: no cap).
    ``layout`` "query_first" moves the request (the user part's last paragraph) before the list.
    ``across_languages`` adds the line that tells the model to match across languages (see `LanguageHint`).
    """
    step = "descend" if call_type == "descend" else "select"
    across = "\n" + PROMPTS.fragment("across_languages") if across_languages else ""
    messages = PROMPTS.render(call_type, system={"instructions": PROMPTS.fragment(f"{step}_{mode}"),
                                                 "across_languages": across,
                                                 "answer": answer_form(call_type, mode, cap)}, **user)
    if layout == "query_first":
        # The first mark: lists are single lines (no blank line inside them), a query may hold anything.
        body, _, request = messages[1]["content"].partition(REQUEST_MARK)
        messages[1]["content"] = f"{REQUEST_MARK.lstrip()}{request}\n\n{body}"
    return messages


def other_services_line(count: int, examples: list[str]) -> str:
    """The line of the "other services here" option: a node's own services, with a few names as examples."""
    return PROMPTS.fill("other_services", count=count, examples=", ".join(examples))
