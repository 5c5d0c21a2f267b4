"""Whether a chosen service says it does what its step asks: the step's action word against the service's words.

A step that opens with a specific action ("email it to my team", "translate the text", "book a table") needs a
service that does that action. Retrieval can still rank first a service that only shares the step's other words
("Get Team Information" for "email it to my team": "team" is the rarer word), and the service's standing above the
background (its z) then looks confident. A service whose name and description never use the action's word is
flagged `low_confidence` whatever its score: the runner-up may be the one that does it. Generic verbs ("get",
"find", "show", "check") say what any service does and are not checked, nor is a step in Chinese (no stems here).
"""

from __future__ import annotations

from a2x_local.compose.lexicon import ACTION_WORDS, is_cjk, words
from a2x_local.compose.rules import search_text

GENERIC = frozenset("""
get find show tell give make take put look go keep use help let bring ask check search see list lookup query
retrieve fetch grab gather collect open run start set do want need like please
""".split())
_STEM = 4    # leading letters of the action that a service's (stemmed) words must share: "email", "translat", "book"


def step_action(task: str) -> str | None:
    """The specific action a step opens with ("email" for "email it to my team"), or None."""
    text = search_text(task)
    if is_cjk(text):
        return None
    first = next(iter(words(text)), "")
    return first if first in ACTION_WORDS and first not in GENERIC and len(first) >= 3 else None


def lacks_action(task: str, keywords: frozenset[str]) -> str | None:
    """The step's action when the service's words (stemmed BM25 tokens of its name and description) never use
    it; None when they do, or there is nothing to check."""
    action = step_action(task)
    if action is None or not keywords:
        return None
    prefix = action[:max(_STEM, min(len(action) - 1, 6))]
    return None if any(word.startswith(prefix) or action.startswith(word) for word in keywords
                       if len(word) >= 3) else action
