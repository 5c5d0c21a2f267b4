"""The rule decomposer: a request's steps from its wording, with no model, the registry settling what words cannot.

`clauses.pieces` cuts the request where a need may start; this module decides what the pieces become:
- context sentences join the step they belong to (the next one when no step came before, else the one before);
- a condition is a step of its own when it comes first ("Once the parcel arrives, text me": check the parcel, then
  text), placed before what it conditions even when written after it ("Register the domain if it is available");
  a condition on an earlier step's result ("..., and if it is below 200 dollars, buy") joins what it conditions,
  which then depends on that earlier step. Nothing is lost either way: the condition's words stay in a step;
- a "soft" piece (an action after "and" or a comma, a request sentence) stays a step unless the registry finds the
  same best service for it and the piece before (one service does both, so it is one need), or it points back at
  the piece before and finds no confident service of its own (a restatement: "Can you get it for me?");
- an "undecided" piece (a verb-or-noun word after "and": "... and book flights") is a step only when the registry
  says so: each side's best service stands out from the background (a confident match), the two differ, and the
  whole request's top candidates do not already hold both. Without a registry it joins the piece before;
- a piece too short to search on its own ("Then, thanks.") joins the one before; past ``max_steps`` the rest joins
  the last step.
Sequence markers, numbered lists, conditions and references back ("... and send it") make a step depend on the step
before; additive markers ("also", "另外") and bullets do not. Every word of the request ends up in exactly one step,
but for the connectors that open a step ("and", "then", "also", a list marker): they join steps, they are no part of
a task ("and email it to my team" is the task "email it to my team").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from a2x_local.compose.clauses import Piece, pieces, substantial_condition
from a2x_local.compose.lexicon import ADDITIVE, ORDERED, ZH_ADDITIVE, ZH_ORDERED, is_cjk, restates, size
from a2x_local.compose.segments import normalise
from a2x_local.compose.types import Step

MIN_SIZE = 2            # words (or CJK characters, MIN_CJK_SIZE) a piece needs to be searched on its own
MIN_CJK_SIZE = 3


@dataclass(frozen=True)
class ProbeResult:
    """What a quick search of one text found: service ids best first, and whether the best one stands out from
    the registry's background (a confident match)."""

    top: tuple[str, ...]
    confident: bool


Probe = Callable[[Sequence[str]], list[ProbeResult]]

_EN_OPENERS = sorted((*ORDERED, *ADDITIVE, "and", "&", "or", "but", "so", "please"), key=len, reverse=True)
_EN_PREFIX = re.compile(r"^(?:[\s,;:，；：、.]|(?:" + "|".join(r"\s+".join(map(re.escape, w.split()))
                                                            for w in _EN_OPENERS) + r")\b)+", re.IGNORECASE)
_ZH_PREFIX = re.compile(r"^(?:[\s,;:，；：、]|" + "|".join(sorted((*ZH_ORDERED, *ZH_ADDITIVE, "且"), key=len,
                                                               reverse=True)) + ")+")
_MARKER = re.compile(r"^\s*(?:[-*•·▪◦–]\s*|[(（]?\d{1,2}[.)）、:．]\s*|[(（]\d{1,2}[)）]\s*|"
                     r"[一二三四五六七八九十]{1,2}[、.．]\s*|[\u2460-\u2473]\s*)")


def task_text(text: str) -> str:
    """A piece as a step's task: spaces collapsed, separators at either end removed (its words all kept)."""
    collapsed = " ".join(text.split())
    return collapsed.strip(" ,;:，；：、") or collapsed


def search_text(task: str) -> str:
    """What to search for a step: its task without the list marker and the sequence words it opens with."""
    text = task
    for _ in range(3):
        text = _MARKER.sub("", text)
        text = (_ZH_PREFIX if is_cjk(text[:4]) else _EN_PREFIX).sub("", text)
    text = text.strip(" ,;:，；：、")
    return text or task


def _big_enough(text: str) -> bool:
    core = search_text(task_text(text))
    return size(core) >= (MIN_CJK_SIZE if is_cjk(core) else MIN_SIZE)


@dataclass(frozen=True)
class _Unit:
    text: str
    joint: str
    ordered: bool

    @property
    def restatement(self) -> bool:
        return restates(search_text(task_text(self.text)))


def _attach_context(found: Sequence[Piece]) -> list[Piece]:
    """Context pieces join the step before them, or the next one when none came before."""
    result: list[Piece] = []
    waiting = ""
    for piece in found:
        if piece.context:
            if result:
                result[-1] = replace(result[-1], text=result[-1].text + piece.text)
            else:
                waiting += piece.text
            continue
        if waiting:
            piece = replace(piece, text=waiting + piece.text)
            waiting = ""
        result.append(piece)
    if waiting:   # nothing but context: it is the need
        result.append(Piece(waiting.strip()))
    return result


def _place_conditions(found: Sequence[Piece]) -> list[_Unit]:
    """Conditions become steps of their own when they come first, else they join what they condition."""
    units: list[_Unit] = []
    index = 0
    while index < len(found):
        piece = found[index]
        following = found[index + 1] if index + 1 < len(found) else None
        joint = "start" if not units else piece.joint
        if piece.condition in ("lead", "before") and following is not None:
            own = not units and substantial_condition(piece.text)
            if own and piece.condition == "lead":
                units.append(_Unit(piece.text, joint, piece.ordered))
                units.append(_Unit(following.text, "hard", True))
            elif own:   # "Before X, Y": Y runs first, then X
                units.append(_Unit(following.text, joint, piece.ordered))
                units.append(_Unit(piece.text, "hard", True))
            else:       # a condition on an earlier result, or a hedge ("if so"): one step with its consequent
                units.append(_Unit(piece.text + following.text, joint, bool(units) or piece.ordered
                                   or following.ordered))
            index += 2
            continue
        if piece.condition in ("trail", "lead", "before") and units:
            main = units[-1]
            if len(units) == 1 and substantial_condition(piece.text):
                units[-1] = _Unit(piece.text, main.joint, False)      # checked first, though written after
                units.append(_Unit(main.text, "hard", True))
            else:
                units[-1] = _Unit(main.text + piece.text, main.joint, main.ordered or len(units) > 1)
            index += 1
            continue
        units.append(_Unit(piece.text, joint, piece.ordered))
        index += 1
    return units


@dataclass(frozen=True)
class Draft:
    """A request cut into candidate steps, before the registry has settled the soft and undecided cuts."""

    request: str
    units: tuple[_Unit, ...]

    def questions(self) -> list[str]:
        """The texts the registry is asked about: both sides of every soft or undecided cut, and the whole request
        when a cut is undecided."""
        asked: list[str] = []
        for index, unit in enumerate(self.units):
            if index and unit.joint in ("soft", "undecided"):
                asked += [search_text(task_text(self.units[index - 1].text)), search_text(task_text(unit.text))]
                if unit.joint == "undecided":
                    asked.append(self.request)
        return list(dict.fromkeys(asked))

    def steps(self, max_steps: int, answers: Mapping[str, ProbeResult] | None = None) -> list[Step]:
        """The steps, cuts settled by ``answers`` (probe results by text; None: no registry to ask)."""
        kept: list[_Unit] = []
        for index, unit in enumerate(self.units):
            if kept and not self._keep(index, answers):
                kept[-1] = replace(kept[-1], text=kept[-1].text + unit.text)
                continue
            kept.append(unit)
        sized: list[_Unit] = []
        for unit in kept:
            if sized and (not _big_enough(unit.text) or len(sized) >= max_steps):
                sized[-1] = replace(sized[-1], text=sized[-1].text + unit.text)
            elif sized and not _big_enough(sized[-1].text) and len(sized) == 1:
                sized[-1] = replace(unit, text=sized[-1].text + unit.text, joint="start", ordered=False)
            else:
                sized.append(unit)
        if len(sized) <= 1:
            return [Step(id="s1", task=task_text(self.request))]
        return [Step(id=f"s{number}", task=search_text(task_text(unit.text)),
                     depends_on=[f"s{number - 1}"] if unit.ordered and number > 1 else [])
                for number, unit in enumerate(sized, start=1)]

    def _keep(self, index: int, answers: Mapping[str, ProbeResult] | None) -> bool:
        unit = self.units[index]
        if unit.joint in ("start", "hard"):
            return True
        if answers is None:
            return unit.joint == "soft"
        left = answers.get(search_text(task_text(self.units[index - 1].text)))
        right = answers.get(search_text(task_text(unit.text)))
        if left is None or right is None or not left.top or not right.top:
            return unit.joint == "soft"
        if unit.joint == "soft":   # one service for both, or a restatement ("Can you get it for me?"): one step
            return left.top[0] != right.top[0] and (right.confident or not unit.restatement)
        whole = answers.get(self.request)
        covered = whole is not None and left.top[0] in whole.top and right.top[0] in whole.top
        return left.confident and right.confident and left.top[0] != right.top[0] and not covered


def rule_draft(request: str) -> Draft:
    """The candidate steps of a request (see the module's rules)."""
    text = normalise(request)
    return Draft(text, tuple(_place_conditions(_attach_context(pieces(text)))))


def rule_steps(request: str, max_steps: int, probe: Probe | None = None) -> list[Step]:
    """The request's steps (at least one, at most ``max_steps``); ``probe`` asks the registry about the cuts the
    words leave open (without it, soft cuts stand and undecided ones do not)."""
    draft = rule_draft(request)
    questions = draft.questions()
    answers = dict(zip(questions, probe(questions), strict=True)) if probe is not None and questions else None
    return draft.steps(max_steps, answers)
