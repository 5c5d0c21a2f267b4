"""The rule decomposer: splits a request into steps at strong connectors, with no model.

A step starts at a clause that opens with a strong connector ("Then, ...", "... and also ...", "Additionally, ...",
"然后", "另外"), or at a later sentence's condition on the step before ("If it is free, then book it"); every other
sentence stays with the step before it, as context ("It should be cheap."). Ordering connectors ("then", "after
that", "finally") and conditions make the new step depend on the one before; additive ones ("also",
"additionally") leave it independent. A request without such a connector is one step, so single-need requests are
searched exactly as plain search would search them. Deliberately conservative: "and" alone never splits, since
"flights and hotels in Rome" is as often one need as two.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from a2x_local.compose.types import Step

ORDERED = ("then", "after that", "afterwards", "after this", "next", "subsequently", "finally", "lastly",
           "然后", "接着", "之后", "随后", "最后", "再")
ADDITIVE = ("also", "additionally", "moreover", "furthermore", "besides", "in addition", "plus", "firstly", "first",
            "secondly", "second", "thirdly", "third", "另外", "此外", "同时", "还有", "并且", "而且", "其次")
# These open a need only before a comma: "Next Monday ..." and "plus-size ..." do not.
COMMA_ONLY = ("next", "plus")


def _piece(word: str) -> str:
    if not word.isascii():
        return word
    pattern = r"\s+".join(word.split()) + r"\b"
    return pattern + r"(?=\s*,)" if word in COMMA_ONLY else pattern


# Longer alternatives first, so "after that" wins over a shorter prefix.
_CONNECTOR = "(?:" + "|".join(_piece(w) for w in sorted((*ORDERED, *ADDITIVE), key=len, reverse=True)) + ")"
_OPENING = re.compile(rf"^(?:and\s+)?(?P<connector>{_CONNECTOR})[\s,，:：]*", re.IGNORECASE)
# Sentence ends (Latin: followed by a space; CJK: none needed), and clause boundaries right before a connector.
_SENTENCE = re.compile(r"(?<=[.?!])\s+|(?<=[。？！；])")
_CLAUSE = re.compile(rf"(?:[,;:，；：]\s*(?:and\s+)?|\s+and\s+)(?={_CONNECTOR})", re.IGNORECASE)
# A condition on what came before ("If it is available, then ..."): its "then" closes the condition.
_CONDITION = re.compile(r"^(?:if|when|once|as soon as|in case|如果|若|假如)\b", re.IGNORECASE)
_WORD = re.compile(r"\w+")
_CJK_CHAR = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
MIN_WORDS = 3       # a shorter clause ("Then, thanks.") stays with the step before it
MIN_CJK_CHARS = 4


@dataclass(frozen=True)
class _Clause:
    text: str           # without its opening connector
    opens: str | None   # "ordered" or "additive" when the clause opens a new need, else None
    whole: str = ""     # as written, for a clause that joins the step before after all


def _clauses(request: str) -> list[_Clause]:
    clauses = []
    for sentence in _SENTENCE.split(request):
        pieces = [piece.strip() for piece in _CLAUSE.split(sentence) if piece and piece.strip()]
        if len(pieces) > 1 and _CONDITION.match(pieces[0]) and _OPENING.match(pieces[1]):
            # The condition and its consequence are one clause, which depends on the step before.
            rest = pieces[1][_OPENING.match(pieces[1]).end():]  # type: ignore[union-attr]
            clauses.append(_Clause(f"{pieces[0]}, {rest}".strip(), "ordered", f"{pieces[0]}, {pieces[1]}"))
            pieces = pieces[2:]
        for piece in pieces:
            opening = _OPENING.match(piece)
            if opening is None:
                clauses.append(_Clause(piece, None))
                continue
            connector = " ".join(opening.group("connector").lower().split())
            rest = piece[opening.end():].strip()
            clauses.append(_Clause(rest or piece, "ordered" if connector in ORDERED else "additive", piece))
    return clauses


def _substantial(text: str) -> bool:
    cjk = len(_CJK_CHAR.findall(text))
    return cjk >= MIN_CJK_CHARS or len(_WORD.findall(text)) - cjk >= MIN_WORDS


def rule_steps(request: str, max_steps: int) -> list[Step]:
    """The request's steps by the rules above (at least one; at most ``max_steps``, extra clauses join the last)."""
    text = " ".join(request.split())
    parts: list[tuple[str, bool]] = []   # (task, depends on the step before)
    for clause in _clauses(text):
        if parts and clause.opens and _substantial(clause.text) and len(parts) < max_steps:
            parts.append((clause.text, clause.opens == "ordered"))
        elif parts:
            task, ordered = parts[-1]
            parts[-1] = (f"{task} {clause.whole or clause.text}", ordered)
        else:
            parts.append((clause.text, False))
    if len(parts) <= 1:
        return [Step(id="s1", task=text)]
    return [Step(id=f"s{number}", task=task, depends_on=[f"s{number - 1}"] if ordered else [])
            for number, (task, ordered) in enumerate(parts, start=1)]
