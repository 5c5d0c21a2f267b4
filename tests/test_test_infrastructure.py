"""The test suite's own rules (issue 35): a default time limit per test; a throw-away home and a scratch folder for
every temporary file, both removed when the session ends (nothing is left in the temporary folder); no test
replacing a private name (a method, an attribute, a module's global) of a2x_local or anything else: a public seam
instead, such as ScriptedEngine's ``before_round``, an engine's ``extra_args``."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import pytest

from tests.conftest import SCRATCH_VARIABLE

ROOT = Path(__file__).resolve().parents[1]
REPORT_HOME = "A2X_TEST_REPORT_HOME"


def test_every_test_has_a_default_time_limit():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    assert 0 < int(config["timeout"]) <= 3600


def test_the_home_is_a_throwaway(tmp_path: Path):
    """Run alone in a child pytest (below): says where the session's home and scratch folder are, and leaves a file
    in the temporary folder as a program under test would; the parent checks that both are gone."""
    target = os.environ.get(REPORT_HOME)
    if not target:
        pytest.skip("run by test_the_temporary_home_is_removed_when_the_session_ends")
    home, scratch = Path(os.environ["A2X_HOME"]), Path(os.environ[SCRATCH_VARIABLE])
    assert home.is_dir() and home.name.startswith("a2x-test-home-")
    assert Path(tempfile.gettempdir()) == scratch and tmp_path.is_relative_to(scratch)
    (Path(tempfile.gettempdir()) / "left-by-a-program").write_text("x", encoding="utf-8")
    Path(target).write_text(f"{home}\n{scratch}", encoding="utf-8")


def test_the_temporary_home_is_removed_when_the_session_ends(tmp_path: Path):
    report, temporary = tmp_path / "report.txt", tmp_path / "tmp"
    temporary.mkdir()
    env = {**os.environ, REPORT_HOME: str(report), "TMPDIR": str(temporary)}
    for variable in ("PYTEST_XDIST_WORKER", SCRATCH_VARIABLE):
        env.pop(variable, None)
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                             f"{Path(__file__).relative_to(ROOT)}::test_the_home_is_a_throwaway"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    home, scratch = map(Path, report.read_text(encoding="utf-8").splitlines())
    assert scratch.parent == temporary and scratch.name.startswith("a2x-")
    assert not home.exists() and not scratch.exists()
    assert list(temporary.iterdir()) == []       # nothing left in the temporary folder


def test_this_session_s_temporary_files_go_to_its_scratch_folder(tmp_path: Path):
    scratch = Path(os.environ[SCRATCH_VARIABLE])
    assert Path(tempfile.gettempdir()) == scratch and os.environ["TMPDIR"] == str(scratch)
    assert tmp_path.is_relative_to(scratch) and Path(os.environ["A2X_HOME"]).is_relative_to(scratch)


# What replaces an attribute: monkeypatch's and the builtin's setattr/delattr/setitem/delitem, mock's patch and
# patch.object. A target is private when a name on the way to it starts with one underscore (`engine._chat`,
# `engine._llm.chat`, "a2x_local.search.llm.methods._retriever"), whoever owns it: a test patches none. An object's
# own state (``self._seen``, in a test double) is its own business.
_PATCHERS = {"setattr", "delattr", "setitem", "delitem", "patch", "object"}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _reaches_private(node: ast.expr) -> bool:
    """Whether an expression goes through a private attribute (``engine._llm``, ``methods._SPECS["x"]``) of
    anything but ``self`` or ``cls``."""
    private = False
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        private = private or (isinstance(node, ast.Attribute) and _private(node.attr))
        node = node.func if isinstance(node, ast.Call) else node.value
    return private and not (isinstance(node, ast.Name) and node.id in ("self", "cls"))


def _patcher(node: ast.AST) -> str | None:
    """The name of a patching call (`monkeypatch.setattr`, `setattr`, `mock.patch.object`), else None."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    return name if name in _PATCHERS else None


def _private_target(call: ast.Call, patcher: str) -> bool:
    """Whether a patching call replaces something private: a dotted name ("pkg.mod._name"), an attribute name
    (``setattr(obj, "_name", ...)``), or anything reached through a private attribute."""
    first = call.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return any(_private(part) for part in first.value.split("."))
    second = call.args[1] if len(call.args) > 1 else None
    named = (patcher not in ("setitem", "delitem") and isinstance(second, ast.Constant)
             and isinstance(second.value, str) and _private(second.value))
    return named or _reaches_private(first)


def private_patches(source: str, where: str) -> list[str]:
    """Assignments to a private attribute and patching calls with a private target, as ``where:line: code``."""
    found = []
    for node in ast.walk(ast.parse(source, filename=where)):
        for target in node.targets if isinstance(node, ast.Assign) else []:
            if isinstance(target, (ast.Attribute, ast.Subscript)) and _reaches_private(target):
                found.append(f"{where}:{node.lineno}: {ast.unparse(target)} = ...")
        patcher = _patcher(node)
        if patcher is not None and _private_target(node, patcher):
            found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_guard_sees_every_way_of_replacing_a_private_name():
    caught = private_patches("""
monkeypatch.setattr(engine, "_chat", counting)
monkeypatch.setattr(engine._llm, "chat", recording)
monkeypatch.setattr("a2x_local.search.llm.methods._retriever", built)
monkeypatch.setitem(methods._LAZY, "echo", "tests:ECHO")
monkeypatch.delattr(module, "_cache")
setattr(engine, "_tokenizer", None)
mock.patch("a2x_local.taxonomy.induction.runner._execute")
patch.object(engine, "_run_batch")
engine._model = None
engine._state["rounds"] = 3
""", "sample")
    assert len(caught) == 10, "\n".join(caught)
    assert private_patches("""
monkeypatch.setattr(engine, "extra_args", forcing)
monkeypatch.setattr("a2x_local.lifecycle.nightly.run_build", build)
monkeypatch.setitem(os.environ, "_A2X", "1")
self._seen = []
self._state["rounds"] = 3
cls._live = None
""", "sample") == []


def test_no_test_replaces_a_private_name():
    found = [hit for path in sorted((ROOT / "tests").rglob("*.py"))
             for hit in private_patches(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))]
    assert found == [], ("use a public seam (a constructor argument, a documented hook such as ScriptedEngine's "
                         "before_round or an engine's extra_args / chat_observers, a test double of "
                         "a2x_local.testing), not:\n" + "\n".join(found))


def test_every_file_of_the_integration_stage_exists_and_holds_tests():
    """A renamed or removed file listed in INTEGRATION_FILES would put its successor in the main suite unseen."""
    from tests.conftest import INTEGRATION_FILES

    missing = [name for name in sorted(INTEGRATION_FILES)
               if not (ROOT / name).is_file() or "def test_" not in (ROOT / name).read_text(encoding="utf-8")]
    assert missing == [], f"tests/conftest.py lists files that hold no tests: {missing}"
