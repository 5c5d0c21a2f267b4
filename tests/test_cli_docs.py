"""docs/cli.md is generated from the CLI by scripts/gen_cli_docs.py and must match what the CLI says now."""

from __future__ import annotations

import difflib
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "cli.md"
HINT = "run .venv/bin/python scripts/gen_cli_docs.py"


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    return load_script("gen_cli_docs")


def test_docs_cli_md_is_current(generator: ModuleType):
    expected = generator.render()
    current = DOCS.read_text(encoding="utf-8") if DOCS.is_file() else ""
    if current != expected:
        diff = "".join(list(difflib.unified_diff(current.splitlines(True), expected.splitlines(True), "docs/cli.md",
                                                 "generated", n=1))[:60])
        pytest.fail(f"docs/cli.md is stale: {HINT}\n{diff}")


def test_reference_covers_every_command_and_is_plain_markdown(generator: ModuleType, monkeypatch: pytest.MonkeyPatch):
    text = generator.render()
    assert "\x1b[" not in text, "ANSI escape codes in the generated reference"
    assert text.splitlines()[2].startswith("Kind: reference")          # its kind, as every page of docs/ says it
    assert "scripts/gen_cli_docs.py" in text.splitlines()[4]
    for heading in ("## a2x-local search", "### a2x-local services list", "### a2x-local eval compare",
                    "### a2x-local tree import"):
        assert f"\n{heading}\n" in text
    assert "- `--method`, `-m` `str`:" in text
    # Nothing depends on the terminal: another width gives the same bytes.
    monkeypatch.setenv("COLUMNS", "37")
    assert generator.render() == text


def test_check_mode_fails_on_a_stale_file(generator: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    stale = tmp_path / "cli.md"
    stale.write_text("# old\n", encoding="utf-8")
    assert generator.main(["--check", "--file", str(stale)]) == 1
    assert HINT in capsys.readouterr().err
    assert generator.main(["--file", str(stale)]) == 0
    assert generator.main(["--check", "--file", str(stale)]) == 0
    assert stale.read_text(encoding="utf-8") == generator.render()
