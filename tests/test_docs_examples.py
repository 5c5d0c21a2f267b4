"""The docs' runnable examples print what the pages show (issue 33: the manual cannot drift again). Refresh them with
`scripts/update_docs_examples.py` after changing what a command prints."""

from __future__ import annotations

import pytest

from tests.support.docs_examples import PAGES, ROOT, check, examples, matches

ALL = [example for page in PAGES for example in examples(ROOT / page)]


def test_the_pages_hold_runnable_examples() -> None:
    assert {example.page.name for example in ALL} >= {"README.md", "registry.md", "search.md", "evaluation.md",
                                                      "compose.md"}


@pytest.mark.parametrize("example", ALL, ids=lambda e: f"{e.page.name}:{e.start}")
def test_an_example_prints_what_its_page_shows(example) -> None:
    failures = check(example)
    assert not failures, "\n\n".join(failures) + "\n(scripts/update_docs_examples.py rewrites them)"


def test_wildcards_match_lines_and_parts_of_lines() -> None:
    assert matches(["took ... ms", "..."], "took 12 ms\nmore\nlines\n")
    assert not matches(["took ... ms"], "took 12 s\n")
    assert matches(["a", "...", "z"], "a\nb\nc\nz")
