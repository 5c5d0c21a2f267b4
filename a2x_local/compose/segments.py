"""Lists and sentences: the first two levels at which the rule decomposer cuts a request (clauses.py does the third).

Every character of the request stays in some piece: a list's lead-in joins its first item, line breaks stay with
the item they end, a sentence keeps its closing punctuation.
"""

from __future__ import annotations

import re
from itertools import pairwise


def normalise(request: str) -> str:
    """Spaces collapsed, line breaks kept (a list may be written one item per line)."""
    text = request.replace("\r\n", "\n").replace("\r", "\n")
    text = re.sub(r"[^\S\n]+", " ", text)
    return re.sub(r"\s*\n\s*", "\n", text).strip()


# ---- level 1: lists -------------------------------------------------------------------------------------------
_CJK_NUMERALS = {c: n for n, c in enumerate("一二三四五六七八九十", start=1)}
_CIRCLED = {chr(0x2460 + n): n + 1 for n in range(20)}
_LINE_MARK = re.compile(r"^\s*(?:[-*•·▪◦–]|\d{1,2}[.)）、:]|[(（]\d{1,2}[)）]|[一二三四五六七八九十]{1,2}[、.．]|"
                        r"[\u2460-\u2473]|[a-hA-H][.)])\s*")
_INLINE_MARK = re.compile(r"(?:^|(?<=[\s:：;；,，。]))(?:[(（](?P<a>\d{1,2})[)）]|(?P<b>\d{1,2})[)）]|"
                          r"(?P<c>\d{1,2})[.．、](?=\s*[^\d\s])|(?P<d>[\u2460-\u2473])|(?P<e>[一二三四五六七八九十])、)")


def _number(match: re.Match[str]) -> int:
    for key in ("a", "b", "c"):
        if match.group(key):
            return int(match.group(key))
    if match.group("d"):
        return _CIRCLED[match.group("d")]
    return _CJK_NUMERALS[match.group("e")]


def list_items(text: str) -> list[tuple[str, bool]]:
    """(item, numbered) pieces of a list, the text before its first marker joined to the first item; the whole
    text as one item when it holds no list of two or more."""
    lines = text.split("\n")
    marked = [i for i, line in enumerate(lines) if _LINE_MARK.match(line) and _LINE_MARK.sub("", line).strip()]
    if len(marked) >= 2:
        starts = [0] if marked[0] else []
        starts += marked
        ends = [*starts[1:], len(lines)]
        items = ["\n".join(lines[a:b]) + ("\n" if b < len(lines) else "") for a, b in zip(starts, ends, strict=True)]
        if marked[0]:   # the lead-in lines join the first item
            items = [items[0] + items[1], *items[2:]]
        numbered = bool(re.match(r"\s*(?:\d|[(（]|[一二三四五六七八九十]|[\u2460-\u2473])", lines[marked[0]]))
        return [(item, numbered) for item in items]
    found: list[re.Match[str]] = []
    for match in _INLINE_MARK.finditer(text):
        if _number(match) == len(found) + 1:
            found.append(match)
    if len(found) < 2:
        return [(text, False)]
    cuts = [m.start() for m in found]
    bounds = [0, *cuts[1:], len(text)]
    return [(text[a:b], True) for a, b in pairwise(bounds)]


# ---- level 2: sentences ---------------------------------------------------------------------------------------
_ABBREVIATIONS = frozenset("e.g i.e mr mrs ms dr st vs etc inc ltd jr sr no approx a.m p.m u.s u.k fig mt ft co"
                           .split())
_SENTENCE_END = re.compile(r"[.!?]+[\"'”’)\]]*(?=\s)|[。！？!?；;]+|\n")


def sentences(text: str) -> list[str]:
    """Sentences (and semicolon clauses) in order; every character stays in one of them."""
    pieces, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        end = match.end()
        if match.group().startswith("."):
            before = re.findall(r"[\w.]+$", text[start:match.start()])
            if before and (before[0].lower() in _ABBREVIATIONS or len(before[0]) == 1):
                continue
        if text[start:end].strip():
            pieces.append(text[start:end])
            start = end
    if text[start:].strip():
        pieces.append(text[start:])
    elif pieces:
        pieces[-1] += text[start:]
    return [p for p in pieces if p.strip()]
