"""The manual holds together: every relative link of docs/ and README.md reaches a file, and a heading or anchor
when it names one; every page is listed in docs/index.md under exactly one of its three kinds (how-to guides,
reference, explanation), says that same kind on its first line after the title, and README.md points to the index."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.markdown_links import Link, anchors, headings, links, slug
from tests.support.paths import ROOT

DOCS = ROOT / "docs"
INDEX = DOCS / "index.md"
PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
KINDS = {"How-to guides": "how-to", "Reference": "reference", "Explanation": "explanation"}
KIND_LINE = re.compile(r"^Kind: (how-to|reference|explanation) · \[all pages by kind\]\((?:\.\./)*index\.md\)$")


def target(link: Link) -> tuple[Path, str]:
    path, _, fragment = link.target.partition("#")
    return ((link.page.parent / path).resolve() if path else link.page), fragment


def all_links() -> list[Link]:
    return [link for page in PAGES for link in links(page)]


def index_kinds() -> dict[str, list[str]]:
    """Page (relative to docs/) → the kinds under which docs/index.md lists it."""
    listed: dict[str, list[str]] = {}
    kind = None
    for line in INDEX.read_text(encoding="utf-8").split("\n"):
        if line.startswith("## "):
            kind = KINDS.get(line[3:].strip())
        elif kind and line.startswith("- "):
            for link in re.findall(r"\]\(([^)#]+)\)", line)[:1]:     # the first link of an item names its page
                listed.setdefault((DOCS / link).resolve().relative_to(DOCS).as_posix(), []).append(kind)
    return listed


def test_links_are_found() -> None:
    found = {(link.page.name, link.target) for link in all_links()}
    assert ("README.md", "docs/index.md") in found
    assert ("search.md", "algorithm.md#how-a2x-searches") in found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for link in links(page):
        path, fragment = target(link)
        if not path.exists():
            broken.append(f"{link.line}: {link.target} (no such file)")
        elif fragment and path.suffix == ".md" and fragment not in anchors(path):
            broken.append(f"{link.line}: {link.target} (no heading or anchor '{fragment}' in {path.name})")
    assert not broken, f"{page.relative_to(ROOT)}: broken links:\n" + "\n".join(broken)


def test_slugs_follow_github() -> None:
    assert slug("Build cost (`scripts/bench_build.py`)") == "build-cost-scriptsbench_buildpy"
    assert slug("Models that decide badly (`--bad everything,first`)") == \
        "models-that-decide-badly---bad-everythingfirst"
    assert slug("Engines: SmolLM2-135M on a CPU") == "engines-smollm2-135m-on-a-cpu"
    assert "a2x-local-search" in anchors(DOCS / "cli.md")


def test_a_broken_link_is_caught(tmp_path: Path) -> None:
    page = tmp_path / "a.md"
    page.write_text("# A\n\n## Here\n\n## Here\n\n[ok](#here) [ok](#here-1) [gone](b.md) [no anchor](#there)\n\n"
                    "```\n[code](x.md)\n```\n", encoding="utf-8")
    bad = [link.target for link in links(page)
           if not target(link)[0].exists() or (target(link)[1] and target(link)[1] not in anchors(target(link)[0]))]
    assert bad == ["b.md", "#there"]


def test_every_page_is_listed_in_the_index_under_one_kind() -> None:
    listed = index_kinds()
    pages = {page.relative_to(DOCS).as_posix() for page in DOCS.rglob("*.md") if page != INDEX}
    assert not pages - set(listed), f"pages docs/index.md does not list under a kind: {sorted(pages - set(listed))}"
    assert not set(listed) - pages, f"docs/index.md lists pages that do not exist: {sorted(set(listed) - pages)}"
    twice = {page: kinds for page, kinds in listed.items() if len(kinds) > 1}
    assert not twice, f"pages listed more than once: {twice}"
    assert [text for level, text in headings(INDEX) if level == 2] == list(KINDS)


@pytest.mark.parametrize("page", sorted(p for p in DOCS.rglob("*.md") if p != INDEX), ids=lambda p: p.name)
def test_every_page_says_its_kind_at_its_top(page: Path) -> None:
    lines = page.read_text(encoding="utf-8").split("\n")
    assert lines[0].startswith("# ") and lines[1] == "", f"{page.name} starts with its title and a blank line"
    match = KIND_LINE.match(lines[2])
    assert match, f"{page.name}: line 3 should be 'Kind: KIND · [all pages by kind](index.md)', not {lines[2]!r}"
    listed = index_kinds().get(page.relative_to(DOCS).as_posix())
    assert listed == [match.group(1)], f"{page.name} says {match.group(1)}, docs/index.md lists it under {listed}"


def test_the_readme_points_to_the_index() -> None:
    assert any(target(link)[0] == INDEX for link in links(ROOT / "README.md"))
