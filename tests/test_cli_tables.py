"""Tables in ordinary terminals: ids whole (users copy them), headers whole, the description shrunk or left out
first; in a terminal narrower than the ids, each row as lines. Checked on the layout itself (a rich Console of a
given width), through the CLI in-process at 80/100/160 columns, and as a child process with COLUMNS=80."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import pytest
from rich.console import Console

from a2x_local.cli.output import console
from a2x_local.cli.registry_cmds import SERVICE_COLUMNS
from a2x_local.cli.tables import CUT, REST, Column, layout, print_table
from a2x_local.registry import Service
from tests.support.processes import cli_command, tree_env
from tests.support.registries import make_registry

ROOT = Path(__file__).resolve().parents[1]

# Ids as long as real ones (ToolRet's longest is 24 characters, an MCP server's tools SERVER/TOOL longer), beside
# descriptions long enough to take any room rich would give them.
SERVICES = [Service(f"a2a/autonomous-commune-intelligence-api-{n}", "a2a", f"Autonomous Commune Intelligence {n}",
                    "Multi-agent DeFi intelligence: governance tracking, smart money flows, bridge anomalies. " * 4)
            for n in range(3)] + [Service("toolbench_tool_944", "generic", "Currency_Converter", "Convert money.")]
WIDTHS = [80, 100, 160]


def rendered(width: int, columns, rows) -> str:
    out = Console(file=io.StringIO(), width=width, color_system=None)
    print_table(out, "title", columns, rows)
    return out.file.getvalue()


def whole_on_a_line(text: str, value: str) -> bool:
    return any(value in line for line in text.splitlines())


@pytest.mark.parametrize("width", WIDTHS)
def test_the_layout_keeps_ids_and_headers_whole_and_gives_way_with_the_description(width: int):
    rows = [(s.id, s.type, s.name, s.description) for s in SERVICES]
    text = rendered(width, SERVICE_COLUMNS, rows)
    lines = text.splitlines()
    assert all(len(line) <= width for line in lines), text
    for service in SERVICES:
        assert whole_on_a_line(text, service.id), f"{service.id} cut or folded at {width}:\n{text}"
    header = next(line for line in lines if " id " in line)
    assert " type " in header and " name " in header
    assert (" description " in header) == (width >= 100), text   # at 80 it is left out, not squeezed to nothing
    assert "…" in text   # the description (or the name) gives way, with an ellipsis


def test_a_terminal_narrower_than_the_ids_gets_lines_not_a_table():
    rows = [(s.id, s.type, s.name, s.description) for s in SERVICES]
    text = rendered(30, SERVICE_COLUMNS, rows)
    assert "┃" not in text and "│" not in text
    for service in SERVICES:
        assert f"{service.id}  {service.type}" in text.splitlines()
    assert all(len(line) <= 30 for line in text.splitlines() if line.startswith("    ")), text


def test_a_cut_column_keeps_its_header_and_goes_before_a_whole_one():
    columns = (Column("identifier"), Column("model", CUT), Column("note", REST))
    row = [("x" * 20, "m" * 50, "n" * 50)]
    assert layout(columns, row, 120) == [20, 50, 40]    # everything wanted; the note takes the rest
    assert layout(columns, row, 60) == [20, 10, 20]     # the note at its least, the model cut
    assert layout(columns, row, 40) == [20, 13, None]   # no room for a note: the model gets it
    assert layout(columns, row, 32) == [20, None, None]  # not even the model's least: only the whole column
    assert layout(columns, [("x" * 40, "m", "n")], 30) is None   # the whole column alone is too wide


@pytest.fixture
def long_registry(db_path: Path) -> Path:
    return make_registry(db_path, SERVICES)


@pytest.mark.parametrize("width", WIDTHS)
def test_services_list_shows_whole_ids(long_registry, cli, monkeypatch, width: int):
    monkeypatch.setattr(console, "width", width)
    result = cli("services", "list")
    assert result.code == 0, result.err
    for service in SERVICES:
        assert whole_on_a_line(result.out, service.id), f"{service.id} cut at {width}:\n{result.out}"
        assert whole_on_a_line(result.out, service.type)
    assert all(len(line) <= width for line in result.out.splitlines()), result.out


def test_at_columns_80_through_a_pipe_ids_are_whole(long_registry, home):
    env = tree_env(COLUMNS="80", A2X_HOME=str(home))
    for args in (["services", "list"], ["search", "commune intelligence", "-m", "bm25"]):
        done = subprocess.run(cli_command(*args, "--db", str(long_registry)), capture_output=True, text=True,
                              env=env, cwd=ROOT, timeout=120)
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert all(len(line) <= 80 for line in lines), done.stdout
        for service in SERVICES[:3]:
            assert whole_on_a_line(done.stdout, service.id), done.stdout
        assert "\x1b[" not in done.stdout and "[/" not in done.stdout   # no colour codes, no markup when piped


def test_tree_list_keeps_its_headers_and_ids_at_80_columns(registry_db, cli, monkeypatch, tmp_path: Path):
    """An imported tree's note is its file's path: long enough to squeeze every other header ("serv…")."""
    import json

    from tests.support.registries import SERVICES as TEN

    folder = tmp_path / ("a-folder-with-a-long-name-" * 4)
    folder.mkdir()
    tree = folder / "tree.json"
    tree.write_text(json.dumps({"format": "a2x-tree", "version": 1, "root": {
        "name": "All", "description": "Every service.",
        "children": [{"name": "All of them", "description": "Each.", "services": [s.id for s in TEN]}]}}))
    assert cli("tree", "import", tree).code == 0
    monkeypatch.setattr(console, "width", 80)
    out = cli("tree", "list").out
    header = next(line for line in out.splitlines() if " kind " in line)
    for name in ("id", "kind", "status", "created", "services", "leaves", "rounds"):
        assert f" {name} " in header, out
    assert any(line.startswith("│ 1* │") and "│       10 │" in line for line in out.splitlines()), out   # counts right
    assert all(len(line) <= 80 for line in out.splitlines()), out
