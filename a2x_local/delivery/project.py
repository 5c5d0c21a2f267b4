"""The project's own wheel, stamped with where it came from (a2x_local/build_info.json, read by
`a2x_local.provenance`). The stamp is written into a copy of the source, so a checkout is never changed."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import tomllib
from pathlib import Path

from a2x_local.delivery.pip import build_wheel
from a2x_local.errors import UserError
from a2x_local.provenance import BUILD_INFO

# What setuptools needs to build the wheel: the package, its metadata and the readme it names.
_SOURCE_PARTS = ("pyproject.toml", "README.md", "a2x_local")


def source_commit(source: Path) -> tuple[str | None, bool]:
    """(commit id, whether the tree has uncommitted changes) of a git checkout; (None, False) elsewhere."""
    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", "-C", str(source), *args], capture_output=True, text=True, check=False)
    try:
        head = git("rev-parse", "HEAD")
    except FileNotFoundError:  # no git on this machine
        return None, False
    if head.returncode != 0:
        return None, False
    status = git("status", "--porcelain", "--untracked-files=no")
    return head.stdout.strip(), bool(status.stdout.strip())


def source_version(source: Path) -> str:
    """The version pyproject.toml of ``source`` declares."""
    with (check_source(source) / "pyproject.toml").open("rb") as handle:
        return str(tomllib.load(handle)["project"]["version"])


def check_source(source: Path) -> Path:
    source = source.resolve()
    missing = [part for part in _SOURCE_PARTS if not (source / part).exists()]
    if missing:
        raise UserError(f"{source} is not an a2x-local source tree (missing {', '.join(missing)})",
                        hint="run the bundle from a checkout, or name one with --source")
    return source


def build_project_wheel(source: Path, dest: Path, info: dict[str, object]) -> Path:
    """Build a2x-local's wheel from ``source`` into ``dest`` with ``info`` as its build_info.json."""
    source = check_source(source)
    with tempfile.TemporaryDirectory(prefix="a2x-wheel-") as tmp:
        copy = Path(tmp) / "src"
        copy.mkdir()
        for part in _SOURCE_PARTS:
            origin = source / part
            if origin.is_dir():
                shutil.copytree(origin, copy / part, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", BUILD_INFO))
            else:
                shutil.copy2(origin, copy / part)
        (copy / "a2x_local" / BUILD_INFO).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n",
                                                     encoding="utf-8")
        return build_wheel(copy, dest)
