"""Each command's summary in `a2x-local --help` (and in a group's help) is one sentence that breaks only where the
terminal makes it: issue 33 saw the nightly summary broken mid-sentence ("when anything" / "changed") by a line
break in its help text. Checked at a width where every summary fits on one line."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.support.processes import cli_command, tree_env

GROUPS = ["", "services", "eval", "models", "tree", "gateway"]


def _command_rows(group: str) -> dict[str, list[str]]:
    """The Commands box of a help page at 400 columns: each command with its lines (continuations included)."""
    args = [group, "--help"] if group else ["--help"]
    done = subprocess.run(cli_command(*args), env=tree_env(COLUMNS="400", NO_COLOR="1", TERM="dumb"),
                          capture_output=True, text=True, timeout=120, check=True)
    box = done.stdout.split("Commands ", 1)[1].split("╰", 1)[0]
    rows: dict[str, list[str]] = {}
    current = None
    for line in box.splitlines()[1:]:
        cells = re.match(r"│ (\S*)\s+(.*?)\s*│$", line)
        if cells is None:
            continue
        if cells.group(1):
            current = cells.group(1)
            rows[current] = [cells.group(2)]
        elif current is not None:
            rows[current].append(cells.group(2))
    return rows


@pytest.mark.parametrize("group", GROUPS, ids=lambda g: g or "a2x-local")
def test_every_summary_is_one_line_when_the_terminal_is_wide_enough(group: str) -> None:
    rows = _command_rows(group)
    assert rows, "no commands listed"
    broken = {name: lines for name, lines in rows.items() if len(lines) > 1}
    assert not broken, broken
    if not group:
        assert "when anything changed, check it" in rows["nightly"][0]
