"""Prose fits an ordinary 80-column terminal (issue 33): `stats`, `index`, the eval summary, `eval compare`'s
warnings and `models list` wrap their lines at the terminal's width, while into a pipe a line stays one line (for
grep; the docs examples show that side). Run in a real pseudo-terminal, 80 columns wide."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time

import pytest

from tests.support.paths import DATA
from tests.support.processes import ROOT, cli_command, tree_env

_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def in_terminal(args: list[str], env: dict[str, str], columns: int = 80) -> str:
    """What `a2x-local ARGS` shows in a terminal ``columns`` wide (stdout and stderr both on it), as lines: escape
    sequences taken out, and of a line redrawn in place (a progress bar) only its last state."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    process = subprocess.Popen(cli_command(*args), env=env, cwd=ROOT, stdin=follower, stdout=follower,
                               stderr=follower, close_fds=True)
    os.close(follower)
    chunks, deadline = [], time.monotonic() + 300
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.5)
        if ready:
            try:
                data = os.read(leader, 65536)
            except OSError:          # the terminal closed: the command ended
                break
            if not data:
                break
            chunks.append(data)
        elif process.poll() is not None:
            break
    os.close(leader)
    assert process.wait(timeout=60) == 0, b"".join(chunks).decode(errors="replace")[-3000:]
    text = _ESCAPE.sub("", b"".join(chunks).decode("utf-8", errors="replace")).replace("\r\n", "\n")
    return "\n".join(line.split("\r")[-1] for line in text.split("\n"))


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    folder = tmp_path_factory.mktemp("width")
    env = tree_env(A2X_HOME=str(folder / "home"), A2X_DB=str(folder / "registry.duckdb"), COLUMNS="80",
                   HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env.pop("NO_COLOR", None)
    subprocess.run(cli_command("ingest", str(DATA / "sample_small" / "services.json")), env=env, cwd=ROOT,
                   check=True, capture_output=True, timeout=300)
    return folder, env


def test_prose_lines_wrap_at_80_columns(registry) -> None:
    folder, env = registry
    queries = str(DATA / "sample_small" / "queries.json")
    shown = {
        "stats": in_terminal(["stats"], env),
        "index": in_terminal(["index", "--only", "bm25"], env),
        "eval": in_terminal(["eval", "-q", queries, "-m", "bm25", "-k", "5", "--limit", "5", "--no-plots",
                             "--out", str(folder / "k5")], env),
        "eval k10": in_terminal(["eval", "-q", queries, "-m", "bm25", "-k", "10", "--limit", "10", "--no-plots",
                                 "--out", str(folder / "k10")], env),
        "compare": in_terminal(["eval", "compare", str(folder / "k5"), str(folder / "k10")], env),
        "models list": in_terminal(["models", "list"], env),
    }
    too_wide = {name: [line for line in text.splitlines() if len(line.rstrip()) > 80]
                for name, text in shown.items()}
    assert not any(too_wide.values()), too_wide
    # The wrapped prose is all there.
    compare = " ".join(shown["compare"].split())
    assert "warning: not comparable: the runs cut at different k" in compare and "rerun with the same -k" in compare
    assert "embedding model:" in shown["index"] and "hit/recall @1=" in " ".join(shown["eval"].split())
