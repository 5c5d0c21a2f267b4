"""Runnable examples in the docs: find them, run them, compare or rewrite what they print.

An example is a ```console block right after a `<!-- docs-test -->` line. Its `$ a2x-local ...` lines are commands,
the lines after each are what it prints (stdout, then stderr). Every block runs in a temporary folder of its own
holding a link to the repository's `data/` (so `data/...` paths work and what a command writes, `runs/` say, stays
there), with a fresh home, at 100 columns with colour off, and as if into a pipe. The marker takes options:

- `seed=sample`: the block starts from a registry already holding `data/sample` (`SEEDS`; ingested once for all
  blocks that name it), instead of an empty one;
- `columns=80`: the width the block is shown at (an ordinary terminal).

A block `<!-- docs-test-file NAME -->` before any fenced block writes that block's text to NAME (relative to the
example's folder: `home/config.toml` is the home's configuration) for every later example of the page.

Comparison ignores trailing spaces and blank lines at the end; in the expected text a line `...` matches any
number of lines and `...` inside a line matches any text (timings, paths of the temporary folder). A command whose
shown output has no `error:` line must exit 0, and one with an error line must not. `update` rewrites the expected
output in place (`scripts/update_docs_examples.py`), keeping the wildcard lines it can. The commands run in one
process per width (`docs_driver.py`), so the test costs the commands, not a Python start each.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARK = "<!-- docs-test"
FILE_MARK = "<!-- docs-test-file "
PAGES = ("README.md", *(f"docs/{name}" for name in (
    "registry.md", "search.md", "evaluation.md", "compose.md", "build.md", "lifecycle.md", "configuration.md",
    "serve.md")))
# Registries examples can start from (`seed=NAME`): the commands that make them.
SEEDS = {"sample": [["ingest", "data/sample"]]}
DEFAULT_COLUMNS = 100


@dataclass
class Example:
    page: Path
    start: int            # index of the first line inside the block
    end: int              # index of the closing fence
    commands: list[tuple[str, list[str]]]   # (command line, expected lines)
    seed: str | None = None
    columns: int = DEFAULT_COLUMNS
    files: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.page.name}:{self.start}"


@dataclass(frozen=True)
class Output:
    text: str
    code: int


def _options(marker: str) -> dict[str, str]:
    body = marker.strip().removeprefix(MARK).removesuffix("-->").strip()
    return dict(part.split("=", 1) for part in body.split())


def examples(page: Path) -> list[Example]:
    lines = page.read_text(encoding="utf-8").split("\n")
    found: list[Example] = []
    files: dict[str, str] = {}
    for index, line in enumerate(lines):
        marker = line.strip()
        if not marker.startswith(MARK) or not marker.endswith("-->") or index + 1 >= len(lines) \
                or not lines[index + 1].startswith("```"):
            continue
        end = next(i for i in range(index + 2, len(lines)) if lines[i].startswith("```"))
        if marker.startswith(FILE_MARK):
            name = marker.removeprefix(FILE_MARK).removesuffix("-->").strip()
            # data/ is a link to the repository's own: a page never writes there.
            assert not Path(name).is_absolute() and ".." not in Path(name).parts and Path(name).parts[0] != "data", \
                f"{page}:{index + 1}: {name}"
            files[name] = "\n".join(lines[index + 2:end]) + "\n"
            continue
        if not lines[index + 1].startswith("```console"):
            continue
        options = _options(marker)
        unknown = set(options) - {"seed", "columns"}
        assert not unknown and options.get("seed", "sample") in SEEDS, f"{page}:{index + 1}: {marker}"
        commands: list[tuple[str, list[str]]] = []
        for body in lines[index + 2:end]:
            if body.startswith("$ "):
                commands.append((body[2:], []))
            elif commands:
                commands[-1][1].append(body)
        found.append(Example(page, index + 2, end, commands, options.get("seed"),
                             int(options.get("columns", DEFAULT_COLUMNS)), dict(files)))
    return found


def _argv(example: Example, command: str) -> list[str]:
    argv = shlex.split(command)
    assert argv[0] == "a2x-local", f"{example.page}: only a2x-local commands run here: {command}"
    return argv[1:]


def run_examples(chosen: list[Example]) -> dict[str, list[Output]]:
    """What each command of each example prints (masked) and its exit code, by example name."""
    results: dict[str, list[Output]] = {}
    with tempfile.TemporaryDirectory(prefix="a2x-docs-") as tmp:
        for columns in sorted({example.columns for example in chosen}):
            group = [example for example in chosen if example.columns == columns]
            folder = Path(tmp) / f"w{columns}"
            blocks = [{"folder": str(folder / f"b{number}"), "seed": example.seed, "files": example.files,
                       "commands": [_argv(example, command) for command, _ in example.commands]}
                      for number, example in enumerate(group)]
            spec, out = folder.with_suffix(".spec.json"), folder.with_suffix(".out.json")
            spec.write_text(json.dumps({"columns": columns, "seeds": SEEDS, "blocks": blocks}), encoding="utf-8")
            done = subprocess.run([sys.executable, "-m", "tests.support.docs_driver", str(spec), str(out)],
                                  cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                                  text=True, timeout=900, check=False)
            assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
            for example, block, outputs in zip(group, blocks, json.loads(out.read_text()), strict=True):
                results[example.name] = [
                    Output(_masked(item["out"] + item["err"], block["folder"], folder), item["code"])
                    for item in outputs]
    return results


_TIMING = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)? ms\b")
_SECONDS = re.compile(r'("seconds": )[\d.e-]+')


def _masked(text: str, block: str, width_folder: Path) -> str:
    """The temporary folders shown as TMP, the checkout's path left out; timings vary from run to run: shown as the
    wildcard, so a page need not say them."""
    for seed in SEEDS:
        text = text.replace(str(width_folder / f"seed-{seed}"), "TMP")
    text = text.replace(block, "TMP").replace(f"{ROOT}/", "")
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


def _fails(expected: list[str]) -> bool:
    return any(line.startswith("error:") for line in expected)


def check(example: Example, outputs: list[Output]) -> list[str]:
    """The commands whose output or exit code differs from what the page shows, with both."""
    failures = []
    for (command, expected), actual in zip(example.commands, outputs, strict=True):
        if not matches(expected, actual.text):
            failures.append(f"{example.page.name}: $ {command}\n--- the page shows:\n" + "\n".join(expected)
                            + f"\n--- it prints:\n{actual.text}")
        elif (actual.code != 0) != _fails(expected):
            failures.append(f"{example.page.name}: $ {command}\n--- exit code {actual.code}, where the page shows "
                            + ("an error" if _fails(expected) else "no error"))
    return failures


def update(page: Path) -> int:
    """Rewrite the expected output of every example of ``page``; the number of commands whose text changed."""
    lines = page.read_text(encoding="utf-8").split("\n")
    found = examples(page)
    results = run_examples(found)
    changed = 0
    for example in reversed(found):
        body = []
        for (command, expected), actual in zip(example.commands, results[example.name], strict=True):
            body.append(f"$ {command}")
            if matches(expected, actual.text):
                body += _clean(expected)
            else:
                changed += 1
                body += _clean(actual.text.split("\n"))
        lines[example.start:example.end] = body
    page.write_text("\n".join(lines), encoding="utf-8")
    return changed
