"""Headings, anchors and relative links of the manual's Markdown pages, read as GitHub renders them.

`anchors(page)` is the set of `#fragment`s a page offers: GitHub's slug of every heading (lower case, every character
but letters, digits, spaces, `-` and `_` dropped, spaces made `-`, a repeated slug numbered `-1`, `-2`, ...) and any
`<a id="...">`/`name` of its own. `links(page)` yields every relative link of the page outside fenced code: inline
`[text](target)` and reference definitions `[label]: target`, with the line it is on. Links that leave the
repository (`http:`, `https:`, `mailto:`) are not relative and are not yielded.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(\s*<?([^)\s>]+)>?\s*\)")
DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$")
HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
CODE_SPAN = re.compile(r"`+[^`]*`+")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)


@dataclass(frozen=True)
class Link:
    page: Path
    line: int
    target: str


def prose_lines(page: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of every line outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(page.read_text(encoding="utf-8").split("\n"), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def slug(heading: str) -> str:
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)      # a link in a heading keeps its text
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = "".join(ch for ch in text if ch.isalnum() or ch in " -_")
    return text.replace(" ", "-")


def headings(page: Path) -> list[tuple[int, str]]:
    """(level, text) of every heading outside fenced code."""
    return [(len(m.group(1)), m.group(2)) for _, line in prose_lines(page) if (m := HEADING.match(line))]


@cache
def anchors(page: Path) -> frozenset[str]:
    found: set[str] = set()
    counts: dict[str, int] = {}
    for _, text in headings(page):
        base = slug(text)
        n = counts.get(base, 0)
        counts[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    for _, line in prose_lines(page):
        found.update(HTML_ANCHOR.findall(line))
    return frozenset(found)


def links(page: Path) -> Iterator[Link]:
    for number, line in prose_lines(page):
        bare = CODE_SPAN.sub("", line)
        targets = INLINE.findall(bare) + IMAGE.findall(bare)
        if (m := DEFINITION.match(bare)):
            targets.append(m.group(1))
        for target in targets:
            if not EXTERNAL.match(target):
                yield Link(page, number, target)
