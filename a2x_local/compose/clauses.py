"""Cutting a request into pieces at the places a new need may start, without a model.

Three levels, each keeping every character of the request in some piece (a cut never drops text: connectors and
list markers stay with the piece they open):
1. lists: numbered or bulleted lines, or inline markers numbered 1, 2, 3 ... ("1) ... 2) ...", "(1)", "①", "一、");
2. sentences, and semicolons inside them;
3. clauses: at sequence markers ("then", "after that", "followed by", "finally", "second", "然后", "再", "并"), at
   conditions ("once X, Y", "Y if X", "如果X，Y", "X以后Y"), and at "and" / a comma / "，" / "和" where the next clause
   opens with an action.
Each piece says how it joins the one before it (``joint``): "hard" (a marker, a list item, a semicolon), "soft" (an
action after "and" or a comma, or a request sentence: the registry may still merge it) or "undecided" (a verb-or-noun
word after "and": the registry decides). Context sentences ("I'm planning a trip.") are marked to join a neighbour.
Deciding what the pieces become is rules.py's job.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from a2x_local.compose.lexicon import (
    ADDITIVE,
    COMMA_ONLY,
    COMPLEMENT_TAKERS,
    CONDITIONS,
    MIN_CONDITION_WORDS,
    ORDERED,
    THEN_TIMES,
    ZH_ADDITIVE,
    ZH_CONDITIONS,
    ZH_ORDERED,
    chinese_action,
    chinese_has_action,
    english_action,
    english_has_action,
    is_cjk,
    is_request,
    refers_back,
    size,
    words,
)
from a2x_local.compose.segments import list_items, normalise, sentences


@dataclass(frozen=True)
class Piece:
    """A stretch of the request that may be a step of its own.

    ``joint``: how it joins the piece before ("start", "hard", "soft", "undecided"); ``ordered``: it depends on the
    piece before (a sequence marker, a numbered list, a reference back); ``condition``: "lead" (a condition written
    before what it conditions), "trail" (written after it) or "before" (a "before X, Y" clause: Y runs first);
    ``context``: no need of its own, it joins a neighbour.
    """

    text: str
    joint: str = "start"
    ordered: bool = False
    condition: str | None = None
    context: bool = False


# ---- level 3: clauses -----------------------------------------------------------------------------------------
def _alternatives(phrases: tuple[str, ...]) -> str:
    return "|".join(r"\s+".join(map(re.escape, p.split())) for p in sorted(phrases, key=len, reverse=True))


_FREE = ("then", "followed by", "after that", "after this", "afterwards", "afterward", "after which", "subsequently")
_EN_CONNECTOR = re.compile(rf"(?P<sep>[,，:]\s*|\s+)(?P<and>and\s+)?(?P<conn>{_alternatives(ORDERED + ADDITIVE)})"
                           r"(?=$|[\s,，:：])", re.IGNORECASE)
_EN_CONDITION_AFTER_COMMA = re.compile(rf"[,，]\s*(?=(?:and\s+|but\s+)?(?:{_alternatives(CONDITIONS)})\b)", re.I)
_EN_TRAILING_CONDITION = re.compile(r"\s+(?=(?:if|when|whenever|once|as\s+soon\s+as|in\s+case|unless|"
                                    r"(?P<pair>after|before)\s+(?:you|i|we|it|they|he|she)\b)\s)", re.IGNORECASE)
_EN_AND = re.compile(r"[,，]\s*(?:and\s+)?(?=\S)|\s+and\s+(?=\S)|\s*&\s*(?=\S)", re.IGNORECASE)
_EN_LEAD_CONDITION = re.compile(rf"^(?:and\s+|but\s+|then\s+)?(?P<kind>{_alternatives(CONDITIONS)})\b", re.I)
_QUESTION_WHEN = re.compile(r"^when\s+(?:is|are|was|were|do|does|did|will|can|could|should|would)\b", re.I)
_SHORT_CONDITIONS = re.compile(r"^(?:and\s+|but\s+)?(?:if|when)\s+(?:so|not|possible|needed|necessary|any|"
                               r"available|required|you\s+can|applicable)\b", re.IGNORECASE)
_ZH_CONNECTORS = "|".join(sorted(ZH_ORDERED + ZH_ADDITIVE, key=len, reverse=True))
_ZH_CONNECTOR = re.compile(rf"(?P<sep>[，,、]\s*)?(?P<conn>{_ZH_CONNECTORS})")
_ZH_CONDITION = re.compile(rf"^(?:{'|'.join(ZH_CONDITIONS)})")
_ZH_AFTER = re.compile(r"(?:以后|之后|后|的话)(?=\s*[，,]?\s*\S)")
_ZH_COMMA = re.compile(r"[，,]\s*")
_ZH_AND = re.compile(r"(?:和|与|跟)")
_ZH_SHORT = ("如果可以", "如果可能", "如果需要", "如果有的话", "如果方便")


_ORDINALS = ("second", "third", "fourth", "fifth")
_COUNT_OPENER = re.compile(r"^\W*(?:first|firstly|first\s+of\s+all)\b", re.IGNORECASE)


def _counting(head: str) -> bool:
    """Whether the request opened by counting ("First ..., second ..., third ..."): an ordinal after a comma then
    starts the next item whatever word follows it ("third free up space")."""
    return bool(_COUNT_OPENER.match(head))


@dataclass(frozen=True)
class _Cut:
    at: int          # where the new piece starts (its opening connector included)
    joint: str       # "hard" | "soft" | "undecided"
    ordered: bool = False
    trailing: bool = False   # a condition written after what it conditions
    before: bool = False     # a trailing "before X": X runs after the main clause


def _inside_quotes(text: str, at: int) -> bool:
    head = text[:at]
    return head.count('"') % 2 == 1 or head.count("“") > head.count("”") or (
        len(re.findall(r"(?:^|\s)'", head)) > len(re.findall(r"'(?:\s|$|[,.?!])", head)))


def _english_cuts(text: str) -> list[_Cut]:
    cuts: list[_Cut] = []
    for match in _EN_CONNECTOR.finditer(text):
        conn = " ".join(match.group("conn").lower().split())
        comma = "," in match.group("sep") or "，" in match.group("sep") or ":" in match.group("sep")
        after = text[match.end():]
        if conn in COMMA_ONLY and not re.match(r"\s*,", after) and not (
                conn in _ORDINALS and comma and (english_action(after) or _counting(text[:match.start()]))):
            continue
        if not comma and not match.group("and") and conn not in _FREE:
            continue
        if conn == "then" and (words(text[:match.start()]) or [""])[-1] in THEN_TIMES:
            continue
        at = match.start("and") if match.group("and") else match.start("conn")
        cuts.append(_Cut(at, "hard", ordered=conn in ORDERED))
    for match in _EN_CONDITION_AFTER_COMMA.finditer(text):
        cuts.append(_Cut(match.end(), "hard"))
    for match in _EN_TRAILING_CONDITION.finditer(text):
        before_words = words(text[:match.start()])
        if not before_words or before_words[-1] in COMPLEMENT_TAKERS or before_words[-1] in ("and", "or") or (
                len(before_words) > 1 and " ".join(before_words[-2:]) in ("me know", "tell me", "show me", "ask me")):
            continue
        if (pair := match.group("pair")) is not None:
            cuts.append(_Cut(match.end(), "hard", ordered=pair.lower() == "before", trailing=pair.lower() == "after",
                             before=pair.lower() == "before"))
        else:
            cuts.append(_Cut(match.end(), "hard", trailing=True))
    for match in _EN_AND.finditer(text):
        rest = text[match.end():]
        kind = english_action(rest)
        if kind is None:
            continue
        head = words(text[:match.start()])
        if "," not in match.group() and any(w in ("between", "both", "either") for w in head[-4:]):
            continue
        at = match.start() + (match.group().index("and") if re.search(r"\band\b", match.group()) else
                              len(match.group()))
        cuts.append(_Cut(at, "undecided" if kind == "homograph" else "soft"))
    return cuts


def _chinese_cuts(text: str) -> list[_Cut]:
    cuts: list[_Cut] = []
    first_xian = text.find("先")
    for match in _ZH_CONNECTOR.finditer(text):
        conn, start = match.group("conn"), match.start("conn")
        comma = match.group("sep") is not None
        rest = text[match.end():]
        if start == 0:
            continue
        if conn in ("并", "并且", "以及") and not (chinese_action(rest) or (comma and conn == "并且")):
            continue
        if conn == "再" and not ((comma or 0 <= first_xian < start) and chinese_action(text[start:])):
            continue
        if conn in ("之后", "最后", "另外", "此外", "同时", "还要", "还有", "顺便", "而且", "其次") and not comma:
            continue
        if conn == "最后" and re.match(r"[一个的几]", rest):
            continue
        cuts.append(_Cut(match.start("sep") if comma else start, "hard", ordered=conn in ZH_ORDERED))
    for match in _ZH_COMMA.finditer(text):
        rest = text[match.end():]
        if rest.startswith(tuple(ZH_CONDITIONS)):
            cuts.append(_Cut(match.start(), "hard"))
        elif chinese_action(rest):
            cuts.append(_Cut(match.start(), "soft"))
    if _ZH_CONDITION.match(text):   # a leading condition ends at the first comma or 就
        end = re.search(r"[，,]|就", text)
        if end:
            cuts.append(_Cut(end.start(), "hard"))
    for match in _ZH_AFTER.finditer(text):
        rest = text[match.end():].lstrip("，, ")
        if match.start() >= 2 and chinese_action(rest):
            cuts.append(_Cut(match.end(), "hard", ordered=True))
    for match in _ZH_AND.finditer(text):
        if match.start() > 0 and chinese_action(text[match.end():]):
            cuts.append(_Cut(match.start(), "soft"))
    return cuts


def _is_condition(text: str) -> str | None:
    """The condition keyword a clause opens with ("if", "before", "如果", ...), or None."""
    if is_cjk(text):
        stripped = text.strip(" ，,")
        if _ZH_CONDITION.match(stripped) or re.search(r"(?:以后|之后|后|的话)[，,]?\s*$", stripped):
            return "如果"
        return None
    match = _EN_LEAD_CONDITION.match(text.strip())
    if match is None or _QUESTION_WHEN.match(text.strip()):
        return None
    return " ".join(match.group("kind").lower().split())


def substantial_condition(text: str) -> bool:
    """A condition worth a step of its own ("if it rains tomorrow"), not a hedge ("if so", "if possible")."""
    stripped = text.strip(" ,，")
    if is_cjk(stripped):
        return size(stripped) >= 5 and not stripped.startswith(_ZH_SHORT)
    return len(words(stripped)) >= MIN_CONDITION_WORDS and not _SHORT_CONDITIONS.match(stripped)


def clauses(sentence: str) -> list[Piece]:
    """The pieces of one sentence (or semicolon clause), cut where a new need may start."""
    text = sentence
    raw = _chinese_cuts(text) if is_cjk(text) else _english_cuts(text)
    by_position: dict[int, _Cut] = {}
    rank = {"hard": 0, "soft": 1, "undecided": 2}
    for cut in raw:
        if 0 < cut.at < len(text) and not _inside_quotes(text, cut.at):
            held = by_position.get(cut.at)
            if held is None or rank[cut.joint] < rank[held.joint]:
                by_position[cut.at] = cut
    cuts = [by_position[at] for at in sorted(by_position)]
    pieces: list[Piece] = []
    start, opening = 0, _Cut(0, "start")
    for cut in [*cuts, _Cut(len(text), "end")]:
        part = text[start:cut.at]
        if not part.strip():
            continue
        pieces.append(_piece(part, opening))
        start, opening = cut.at, cut
    return _check_actions(pieces)


def _piece(part: str, cut: _Cut) -> Piece:
    condition = _is_condition(part)
    if cut.trailing:
        kind = "trail"
    elif cut.before:
        kind = None
    elif condition == "before":
        kind = "before"
    elif condition is not None:
        kind = "lead"
    else:
        kind = None
    return Piece(part, cut.joint, ordered=cut.ordered, condition=kind)


def _check_actions(pieces: list[Piece]) -> list[Piece]:
    """Soft and undecided cuts need an action on the left as well ("salt and ..." is no need); a lead condition
    with nothing after it in the sentence conditions what came before it (a trailing one)."""
    checked: list[Piece] = []
    for index, piece in enumerate(pieces):
        if checked and piece.joint in ("soft", "undecided") and checked[-1].condition in ("lead", "before"):
            piece = replace(piece, joint="hard")          # the consequent of a condition: no action needed on the left
        elif checked and piece.joint in ("soft", "undecided"):
            left = checked[-1].text
            has_action = chinese_has_action(left) if is_cjk(left) else english_has_action(left)
            if not has_action or size(_core(left)) < 2:
                checked[-1] = replace(checked[-1], text=checked[-1].text + piece.text)
                continue
        if piece.condition == "lead" and index == len(pieces) - 1 and index > 0:
            piece = replace(piece, condition="trail")
        checked.append(piece)
    return checked


_LEADING = re.compile(r"^[\s,，;；:：、]*(?:and\s+|&\s*)?", re.IGNORECASE)


def _core(text: str) -> str:
    return _LEADING.sub("", text)


_EN_OPENING = re.compile(rf"^(?:and\s+)?(?P<conn>{_alternatives(ORDERED + ADDITIVE)})(?=$|[\s,，:：])", re.I)


def _opening(sentence: str) -> tuple[str, bool] | None:
    """("hard", ordered) when a sentence opens with a sequence marker or a condition ("Then ...", "Also, ...",
    "If it is free, ...", "然后...", "另外..."), else None."""
    text = sentence.strip()
    if is_cjk(text):
        for conn in sorted(ZH_ORDERED + ZH_ADDITIVE, key=len, reverse=True):
            if text.startswith(conn):
                return "hard", conn in ZH_ORDERED
        return ("hard", False) if _is_condition(text) else None
    match = _EN_OPENING.match(text)
    if match:
        conn = " ".join(match.group("conn").lower().split())
        if conn not in COMMA_ONLY or re.match(r"\s*,", text[match.end():]):
            return "hard", conn in ORDERED
    return ("hard", False) if _is_condition(text) else None


def pieces(request: str) -> list[Piece]:
    """Every piece of a request, in text order; joined back together they are the (normalised) request.

    A sentence that asks for nothing ("I'm planning a trip to Japan.", "It should be cheap.") is one context piece;
    a later sentence that asks for something opens softly (the registry may merge it with the one before), or hard
    when it opens with a marker ("Then ...", "Also, ...", "If ...").
    """
    text = normalise(request)
    items = list_items(text)
    every = [sentence for item, _ in items for sentence in sentences(item)]
    listed = len(items) > 1     # in a list every sentence is a need, but for a lead-in ("Please do this:")
    asking = [(not sentence.rstrip().endswith((":", "："))) if listed else
              (is_request(sentence) or _opening(sentence) is not None) for sentence in every]
    if not any(asking):
        asking = [True] * len(asking)     # nothing reads as a request: every sentence is taken as one
    found: list[Piece] = []
    position = 0
    for item_index, (item, numbered) in enumerate(items):
        for sentence_index, sentence in enumerate(sentences(item)):
            request_sentence = asking[position]
            position += 1
            if not request_sentence:
                found.append(Piece(sentence, "start", context=True))
                continue
            parts = clauses(sentence)
            first = parts[0]
            if item_index > 0 and sentence_index == 0:
                first = replace(first, joint="hard", ordered=numbered)
            elif any(not p.context for p in found):
                opening = _opening(sentence)
                joint, ordered = opening if opening else ("soft", refers_back(sentence))
                first = replace(first, joint=joint, ordered=ordered)
            parts = [first, *(replace(p, ordered=p.ordered or (p.joint == "soft" and refers_back(p.text)))
                              for p in parts[1:])]
            found += parts
    return found
