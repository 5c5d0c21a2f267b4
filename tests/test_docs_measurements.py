"""A measurement is stated once, in docs/benchmarks.md: no other page of the manual (nor README.md) states one.

A measurement is a quantity with a unit of time, rate, memory, tokens or a share (`4.5 s`, `23.7 ms`, `90.1 req/s`,
`760 MB`, `1,193 computed tokens`, `46.2%`, `3.7×`), or a table of bare numbers (hit@10 `82.1`), in the same
paragraph as what dates it: a commit hash (`e9cb1a7`) or "measured at / on / with / after / beside ..." ("at
commit ..." included). A table counts with the paragraph
just before it, which is where "Measured at commit X:" stands. Fenced code (command examples and their output) is
not prose and is skipped. Configured defaults, limits and bounds carry no commit and no "measured at", so they pass;
so do the findings of docs/security.md's hostile-probe rounds (their before/after cells are findings, not
benchmarks), which are left out by their headings. Other pages link to the benchmarks.md anchor instead, keeping
the claim's gist in words.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.paths import ROOT

BENCHMARKS = ROOT / "docs" / "benchmarks.md"
PAGES = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").rglob("*.md") if p != BENCHMARKS)]
# Sections whose numbers are findings of a probe round, not benchmarks (the heading's start, per page).
FINDINGS = {"security.md": ("Hostile probes",)}

NUMBER = r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![\w.])\d+(?:\.\d+)?"
UNIT = (r"(?:µs|ms|s|sec|seconds?|min|minutes?|h|hours?|GPU-h|KB|MB|GB|TB|KiB|MiB|GiB|TiB|%|×|x"
        r"|(?:tok|tokens|req|requests|calls|passages|texts|queries)/s"
        r"|(?:M |K )?(?:prompt |computed |completion )?tokens)")
QUANTITY = re.compile(rf"(?:{NUMBER})\s?(?:{UNIT})(?![\w/])")
COMMIT = re.compile(r"(?<![\w/.-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![\w/-]|\.\w)")
MEASURED = re.compile(r"\b(?:measured|timed)\s+(?:at|on|with|after|beside)\b|\bat commit\b", re.I)
# A table cell that is a number alone (hit@10 82.1, 1,839): a table of them is a measured table once dated.
NUMERIC_CELL = re.compile(r"\|\s*\**[-+−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?\**\s*(?=\|)")
FENCE = re.compile(r"^\s*(```|~~~)")
ITEM = re.compile(r"^\s{0,3}(?:[-*+]|\d+\.)\s")
HEADING = re.compile(r"^#{1,6}\s+(.*)")


def blocks(text: str, skip_headings: tuple[str, ...] = ()) -> list[tuple[int, str]]:
    """(first line, text) of every paragraph and top-level list item outside fenced code, a table joined to the
    paragraph before it."""
    found: list[tuple[int, list[str]]] = []
    current: list[str] = []
    start = 0
    fenced = skipping = False
    skip_level = 0

    def close() -> None:
        nonlocal current
        if current:
            found.append((start, current))
        current = []

    for number, line in enumerate(text.split("\n"), 1):
        if FENCE.match(line):
            close()
            fenced = not fenced
            continue
        if fenced:
            continue
        if (m := HEADING.match(line)):
            close()
            level = len(line) - len(line.lstrip("#"))
            if skipping and level <= skip_level:
                skipping = False
            if not skipping and m.group(1).startswith(skip_headings) and skip_headings:
                skipping, skip_level = True, level
            continue
        if skipping:
            continue
        if not line.strip() or ITEM.match(line):     # a blank line, or a list item: the next block begins
            close()
            if not line.strip():
                continue
        if not current:
            start = number
        current.append(line)
    close()
    joined: list[tuple[int, str]] = []
    for start, lines in found:
        text_block = "\n".join(lines)
        if lines[0].lstrip().startswith("|") and joined:
            joined[-1] = (joined[-1][0], joined[-1][1] + "\n" + text_block)
        else:
            joined.append((start, text_block))
    return joined


def measurements(text: str, skip_headings: tuple[str, ...] = ()) -> list[tuple[int, str, str]]:
    """(line, quantity, what dates it) of every paragraph that states a measurement."""
    hits = []
    for start, block in blocks(text, skip_headings):
        bare = re.sub(r"\]\([^)]*\)", "]", block)           # link targets are not text
        quantity = QUANTITY.search(bare) or (len(cells := NUMERIC_CELL.findall(bare)) >= 3 and cells[0])
        dated = COMMIT.search(bare) or MEASURED.search(bare)
        if quantity and dated:
            shown = quantity if isinstance(quantity, str) else quantity.group(0)
            hits.append((start, shown.strip("| "), dated.group(0)))
    return hits


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_only_benchmarks_md_states_measurements(page: Path) -> None:
    hits = measurements(page.read_text(encoding="utf-8"), FINDINGS.get(page.name, ()))
    assert not hits, (f"{page.relative_to(ROOT)} states measurements (line, quantity, dated by): {hits}; move them "
                      "to docs/benchmarks.md with their commit, machine and command, and link to its anchor")


def test_benchmarks_md_states_them() -> None:
    assert len(measurements(BENCHMARKS.read_text(encoding="utf-8"))) >= 40


@pytest.mark.parametrize("planted", [
    "Measured at commit 6e69727 on 2 cores: hybrid p50 23.7 ms.",
    "The build sent 1.03 M prompt tokens (eac1c04).",
    "At 32 clients a2x served 20.4 req/s, measured on the shared 2-core machine.",
    "Peak RSS 760 MB at 873e1e9.",
    "Measured at commit 3fbe4a6:\n\n| method | hit@10 |\n|---|---|\n| hybrid | 82.1% |",
    "Measured at commit 6e69727:\n\n| method | hit@5 | hit@10 | MRR |\n|---|---|---|---|\n"
    "| hybrid | 75.1 | 82.1 | 62.4 |",
    "The default computes 500 computed tokens per query, 0.42× of published (measured with the reader, at e85fad9).",
])
def test_a_planted_measurement_is_caught(planted: str) -> None:
    assert measurements(f"# Page\n\nSome text.\n\n{planted}\n")


@pytest.mark.parametrize("clean", [
    "- A model folder takes ~540 MB.\n- Numbers measured at a commit live in benchmarks.md.",   # two list items
    "`[serve] loading_wait_s` (20 s) bounds what a client waits.",                  # a configured default
    "The HTTP body limit (`[serve] max_body_bytes`, 64 KiB) bounds a call's arguments.",   # a limit
    "Batching is about three times faster: see [benchmarks](benchmarks.md#build).",   # the gist and a link
    "```console\n$ a2x-local search x --method bm25\n1917 ms, 0 model calls, measured at 1a2b3c4d\n```",  # an example
    "builds a bundle of commit 126173b (before this history existed) with the same dependencies.",  # no quantity
])
def test_what_is_not_a_measurement_passes(clean: str) -> None:
    assert not measurements(f"# Page\n\n{clean}\n")


def test_the_probe_rounds_findings_are_left_out() -> None:
    text = "# S\n\n## Hostile probes, second round\n\nbefore 12 s at commit 648c9a0, after 0.3 s\n\n## Other\n\nplain\n"
    assert measurements(text) and not measurements(text, ("Hostile probes",))
