"""Runs the docs' example commands in one process (`python -m tests.support.docs_driver SPEC RESULTS`).

Why one process: each command started on its own pays Python's start and the CLI's imports (1-2 s on a 2-core
machine), which made the docs test cost a second or two per command shown. Here the CLI is imported once, with
the width and the colours of the pages (COLUMNS, NO_COLOR, TERM are set before the import, since its consoles
read them once), and each command runs through `a2x_local.cli.run` in its block's folder and home, its stdout and
stderr captured apart (joined as a pipe would show them: stdout, then stderr).

SPEC (JSON): ``{"columns": N, "seeds": {name: [argv, ...]}, "blocks": [{"folder", "seed", "files", "commands"}]}``.
A seed is a registry made once (its commands run in a folder of its own) and copied into each block that names it,
so examples over the same registry do not ingest it again. RESULTS gets ``[[{"out", "err", "code"}, ...], ...]``.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DB = "registry.duckdb"


class _Stream(io.TextIOBase):
    """A stdout or stderr that every module keeps one reference to; what it writes goes to the current buffer."""

    def __init__(self) -> None:
        self.buffer_now = io.StringIO()

    def write(self, text: str) -> int:
        return self.buffer_now.write(text)

    def isatty(self) -> bool:        # a pipe, as the pages show
        return False

    def flush(self) -> None:
        return None

    def take(self) -> str:
        text, self.buffer_now = self.buffer_now.getvalue(), io.StringIO()
        return text


def _prepare(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    link = folder / "data"
    if not link.exists():
        link.symlink_to(ROOT / "data")       # the pages' `data/...` paths; what a command writes stays here


def _enter(folder: Path) -> None:
    os.environ["A2X_HOME"] = str(folder / "home")
    os.environ["A2X_DB"] = str(folder / DB)
    os.chdir(folder)


def _copy_seed(seed: Path, folder: Path) -> None:
    for entry in seed.iterdir():
        if entry.name.startswith(DB):           # the database, its WAL, its indexes folder
            target = folder / entry.name
            if entry.is_dir():
                shutil.copytree(entry, target)
            else:
                shutil.copy2(entry, target)


def main() -> int:
    spec = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    # Progress lines go to logs; a page shows what a command answers.
    os.environ.update({"COLUMNS": str(spec["columns"]), "NO_COLOR": "1", "TERM": "dumb", "A2X_PROGRESS_EVERY_S": "off"})
    for name in ("A2X_CONFIG", "A2X_MODELS_DIR"):
        os.environ.pop(name, None)
    out, err = _Stream(), _Stream()
    sys.stdout, sys.stderr = out, err
    from a2x_local.cli import run

    def command(argv: list[str]) -> dict[str, object]:
        out.take(), err.take()
        code = run(argv)
        return {"out": out.take(), "err": err.take(), "code": code}

    seeds: dict[str, Path] = {}
    results = []
    for block in spec["blocks"]:
        folder = Path(block["folder"])
        _prepare(folder)
        seed = block.get("seed")
        if seed and seed not in seeds:
            seeds[seed] = folder.parent / f"seed-{seed}"
            _prepare(seeds[seed])
            _enter(seeds[seed])
            for argv in spec["seeds"][seed]:
                done = command(argv)
                assert done["code"] == 0, f"seed {seed}: {argv}: {done}"
        if seed:
            _copy_seed(seeds[seed], folder)
        for name, text in block.get("files", {}).items():
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        _enter(folder)
        results.append([command(argv) for argv in block["commands"]])
    Path(sys.argv[2]).write_text(json.dumps(results), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
