"""Runnable examples in the docs: find them, run them, compare or rewrite what they print.

An example is a ```console block right after a `<!-- docs-test -->` line. Its `$ a2x-local ...` lines are commands,
the lines after each are what it prints (stdout and stderr together). Every block runs in a fresh empty home and
registry, in a temporary folder holding a link to the repository's `data/` (so `data/...` paths work and what a
command writes, `runs/` say, stays there), at COLUMNS=100 with colour off. Comparison ignores
trailing spaces and blank lines at the end; in the expected text a line `...` matches any number of lines and
`...` inside a line matches any text (timings, paths of the temporary folder). `update` rewrites the expected output
in place (`scripts/update_docs_examples.py`), keeping the wildcard lines it can.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARK = "<!-- docs-test -->"
PAGES = ("README.md", *(f"docs/{name}" for name in ("registry.md", "search.md", "evaluation.md", "compose.md")))
_RUN = "import sys; from a2x_local.cli import run; sys.exit(run(sys.argv[1:]))"


@dataclass
class Example:
    page: Path
    start: int            # index of the first line inside the block
    end: int              # index of the closing fence
    commands: list[tuple[str, list[str]]]   # (command line, expected lines)


def examples(page: Path) -> list[Example]:
    lines = page.read_text(encoding="utf-8").split("\n")
    found = []
    for index, line in enumerate(lines):
        if line.strip() != MARK or index + 1 >= len(lines) or not lines[index + 1].startswith("```console"):
            continue
        end = next(i for i in range(index + 2, len(lines)) if lines[i].startswith("```"))
        commands: list[tuple[str, list[str]]] = []
        for body in lines[index + 2:end]:
            if body.startswith("$ "):
                commands.append((body[2:], []))
            elif commands:
                commands[-1][1].append(body)
        found.append(Example(page, index + 2, end, commands))
    return found


def run_block(example: Example) -> list[str]:
    """What each command of the block prints, in a fresh home and registry."""
    outputs = []
    with tempfile.TemporaryDirectory(prefix="a2x-docs-") as folder:
        env = {**os.environ, "A2X_HOME": str(Path(folder) / "home"), "A2X_DB": str(Path(folder) / "registry.duckdb"),
               "COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb",
               "A2X_PROGRESS_EVERY_S": "off"}  # progress lines go to logs; a page shows what a command answers
        for name in ("A2X_CONFIG", "A2X_MODELS_DIR"):
            env.pop(name, None)
        (Path(folder) / "data").symlink_to(ROOT / "data")    # the pages' paths; what a command writes stays here
        for command, _ in example.commands:
            argv = shlex.split(command)
            assert argv[0] == "a2x-local", f"{example.page}: only a2x-local commands run here: {command}"
            done = subprocess.run([sys.executable, "-c", _RUN, *argv[1:]], cwd=folder, env=env, capture_output=True,
                                  text=True, timeout=300, check=False)
            outputs.append(_masked((done.stdout + done.stderr).replace(folder, "TMP").replace(f"{ROOT}/", "")))
    return outputs


_TIMING = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)? ms\b")
_SECONDS = re.compile(r'("seconds": )[\d.e-]+')


def _masked(text: str) -> str:
    """Timings vary from run to run: shown as the wildcard, so a page need not say them."""
    return _SECONDS.sub(r"\1...", _TIMING.sub("... ms", text))


def _clean(lines: list[str]) -> list[str]:
    kept = [line.rstrip() for line in lines]
    while kept and not kept[-1]:
        kept.pop()
    return kept


def matches(expected: list[str], actual: str) -> bool:
    pattern = []
    for line in _clean(expected):
        if line.strip() == "...":
            pattern.append(r"(?:.*\n)*?")
        else:
            pattern.append(".*".join(re.escape(part) for part in line.split("...")) + r"\n")
    return re.fullmatch("".join(pattern), "\n".join(_clean(actual.split("\n"))) + "\n") is not None


def check(example: Example) -> list[str]:
    """The commands whose output differs from the page, with both."""
    failures = []
    for (command, expected), actual in zip(example.commands, run_block(example), strict=True):
        if not matches(expected, actual):
            failures.append(f"{example.page.name}: $ {command}\n--- the page shows:\n" + "\n".join(expected)
                            + f"\n--- it prints:\n{actual}")
    return failures


def update(page: Path) -> int:
    """Rewrite the expected output of every example of ``page``; the number of commands whose text changed."""
    lines = page.read_text(encoding="utf-8").split("\n")
    changed = 0
    for example in reversed(examples(page)):
        body = []
        for (command, expected), actual in zip(example.commands, run_block(example), strict=True):
            body.append(f"$ {command}")
            if matches(expected, actual):
                body += _clean(expected)
            else:
                changed += 1
                body += _clean(actual.split("\n"))
        lines[example.start:example.end] = body
    page.write_text("\n".join(lines), encoding="utf-8")
    return changed
