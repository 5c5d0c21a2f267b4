"""The docs' runnable examples print what the pages show (issue 33: the manual cannot drift again). Refresh them with
`scripts/update_docs_examples.py` after changing what a command prints.

Every example runs in one process per width (tests/support/docs_driver.py), once for the module: the commands are
the cost, not a Python start each."""

from __future__ import annotations

import re

import pytest

from tests.support.docs_examples import PAGES, ROOT, Example, check, examples, matches, run_examples

ALL = [example for page in PAGES for example in examples(ROOT / page)]
# docs/cli.md is generated from the commands' help (scripts/gen_cli_docs.py), so it shows no output to compare:
# its examples that need no model, no network and no file of the user's must run as written on the sample registry.
CLI_EXAMPLES = {"a2x-local stats --json", "a2x-local services list --type mcp_tool --limit 20",
                "a2x-local services show skill/pdf", "a2x-local models list --json", "a2x-local tree list --json"}


def _cli_md_example() -> Example:
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    shown = {line.strip() for block in re.findall(r"```sh\n(.*?)```", text, re.S) for line in block.splitlines()}
    assert shown >= CLI_EXAMPLES, sorted(CLI_EXAMPLES - shown)   # the page still shows each of them
    return Example(ROOT / "docs" / "cli.md", 0, 0, [(command, ["..."]) for command in sorted(CLI_EXAMPLES)],
                   seed="sample")


CLI = _cli_md_example()


@pytest.fixture(scope="module")
def outputs():
    return run_examples([*ALL, CLI])


def test_the_pages_hold_runnable_examples() -> None:
    assert {example.page.name for example in ALL} >= {"README.md", "registry.md", "search.md", "evaluation.md",
                                                      "compose.md", "build.md", "lifecycle.md", "configuration.md",
                                                      "serve.md"}
    assert any(example.columns == 80 for example in ALL)          # what an ordinary terminal shows


@pytest.mark.parametrize("example", ALL, ids=lambda e: e.name)
def test_an_example_prints_what_its_page_shows(example, outputs) -> None:
    failures = check(example, outputs[example.name])
    assert not failures, "\n\n".join(failures) + "\n(scripts/update_docs_examples.py rewrites them)"


def test_the_command_reference_examples_run_as_written(outputs) -> None:
    for (command, _), output in zip(CLI.commands, outputs[CLI.name], strict=True):
        assert output.code == 0 and "error:" not in output.text, f"$ {command}\n{output.text[-2000:]}"


def test_wildcards_match_lines_and_parts_of_lines() -> None:
    assert matches(["took ... ms", "..."], "took 12 ms\nmore\nlines\n")
    assert not matches(["took ... ms"], "took 12 s\n")
    assert matches(["a", "...", "z"], "a\nb\nc\nz")
