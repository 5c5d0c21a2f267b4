"""Child processes that run THIS tree: every test that starts Python (the CLI, a holder of the database, a server)
builds its command and environment here, so it tests the checkout under test, never an installed copy (in an
editable install of another checkout, a bare child would import that one and write its `__pycache__` there)."""

from __future__ import annotations

import os
import sys

from tests.support.paths import ROOT


def tree_env(**extra: str) -> dict[str, str]:
    """This process's environment, with this checkout first on the import path (and ``extra`` set)."""
    inherited = os.environ.get("PYTHONPATH")
    path = str(ROOT) if not inherited else os.pathsep.join([str(ROOT), inherited])
    return {**os.environ, "PYTHONPATH": path, **extra}


def python_command(code: str, *args: str) -> list[str]:
    """``python -c CODE ARGS`` with this interpreter (run it with ``env=tree_env()``)."""
    return [sys.executable, "-c", code, *args]


def cli_command(*args: str) -> list[str]:
    """`a2x-local ARGS` as a child process (run it with ``env=tree_env()``)."""
    return python_command("from a2x_local.cli import main; main()", *args)
