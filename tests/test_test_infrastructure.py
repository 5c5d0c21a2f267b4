"""The test suite's own rules (issue 35): a default time limit per test, a throw-away home removed when the session
ends, and no test replacing a private method of an object (a public seam instead, such as ScriptedEngine's
``before_round``)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REPORT_HOME = "A2X_TEST_REPORT_HOME"


def test_every_test_has_a_default_time_limit():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    assert 0 < int(config["timeout"]) <= 3600


def test_the_home_is_a_throwaway(tmp_path: Path):
    """Run alone in a child pytest (below): says where the session's home is; the parent checks it is gone."""
    target = os.environ.get(REPORT_HOME)
    if not target:
        pytest.skip("run by test_the_temporary_home_is_removed_when_the_session_ends")
    home = Path(os.environ["A2X_HOME"])
    assert home.is_dir() and home.name.startswith("a2x-test-home-")
    Path(target).write_text(str(home), encoding="utf-8")


def test_the_temporary_home_is_removed_when_the_session_ends(tmp_path: Path):
    report = tmp_path / "home.txt"
    env = {**os.environ, REPORT_HOME: str(report)}
    env.pop("PYTEST_XDIST_WORKER", None)
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                             f"{Path(__file__).relative_to(ROOT)}::test_the_home_is_a_throwaway"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    home = Path(report.read_text(encoding="utf-8"))
    assert home.name.startswith("a2x-test-home-") and not home.exists()


def _private_attribute_patches(path: Path) -> list[str]:
    """``obj._name = ...`` and ``monkeypatch.setattr(obj, "_name", ...)`` on anything but ``self``/``cls``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        targets = node.targets if isinstance(node, ast.Assign) else []
        for target in targets:
            if (isinstance(target, ast.Attribute) and target.attr.startswith("_") and not target.attr.startswith("__")
                    and not (isinstance(target.value, ast.Name) and target.value.id in ("self", "cls"))):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(target)} = ...")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "setattr"
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                and str(node.args[1].value).startswith("_") and not str(node.args[1].value).startswith("__")
                and "_generate" in str(node.args[1].value)):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_test_replaces_an_engines_private_generate():
    found = [hit for path in sorted((ROOT / "tests").rglob("*.py")) for hit in _private_attribute_patches(path)
             if "_generate" in hit]
    assert found == [], "use a public seam (ScriptedEngine(before_round=...)), not:\n" + "\n".join(found)
