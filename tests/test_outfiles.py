"""Every output file goes through one writer (a2x_local/outfiles.py): only a regular file or a new path is written,
anything else is refused and left as it was, and no temporary file outlives a failed write (issue 21, finding 1)."""

from __future__ import annotations

import ast
import errno
import json
import os
import stat
from pathlib import Path

import pytest

from a2x_local.errors import UserError
from a2x_local.lifecycle.report import write_report
from a2x_local.outfiles import open_append, write_output
from a2x_local.taxonomy.induction.spill import write_spill

ROOT = Path(__file__).resolve().parents[1]


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_a_named_pipe_is_refused_and_stays_a_pipe(tmp_path):
    pipe = _fifo(tmp_path / "report.json")
    with pytest.raises(UserError, match=r"report.json: is a named pipe \(FIFO\), not a regular file") as caught:
        write_report(pipe, {"status": "ok"})
    assert caught.value.hint
    assert stat.S_ISFIFO(pipe.lstat().st_mode)
    assert _leftovers(tmp_path) == []


def test_a_folder_is_refused_and_no_temporary_file_is_left_beside_it(tmp_path):
    folder = tmp_path / "reports"
    folder.mkdir()
    with pytest.raises(UserError, match="is a folder, not a regular file"):
        write_report(folder, {"status": "ok"})
    assert folder.is_dir() and list(folder.iterdir()) == []
    assert _leftovers(tmp_path) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_a_device_is_refused_even_for_root(tmp_path):
    """As root the old rename turned /dev/full into a regular file; a device node of our own shows it safely."""
    device = tmp_path / "null"
    os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    with pytest.raises(UserError, match="is a character device"):
        write_output(device, "text")
    assert stat.S_ISCHR(device.lstat().st_mode)


def test_a_link_is_followed_to_a_regular_file_and_stays_a_link(tmp_path):
    target = tmp_path / "real.json"
    target.write_text("old", encoding="utf-8")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    write_output(link, "new")
    assert link.is_symlink() and target.read_text(encoding="utf-8") == "new"
    pipe = _fifo(tmp_path / "pipe")
    (tmp_path / "to-pipe.json").symlink_to(pipe)
    with pytest.raises(UserError, match=r"to-pipe.json \(→ .*pipe\): is a named pipe"):
        write_output(tmp_path / "to-pipe.json", "text")


def test_a_new_path_and_a_regular_file_are_written_whole(tmp_path):
    path = write_output(tmp_path / "deep" / "er" / "out.json", "first")
    assert path.read_text(encoding="utf-8") == "first"
    write_output(path, b"second")
    assert path.read_bytes() == b"second"
    assert _leftovers(path.parent) == []


@pytest.mark.parametrize("failure", [OSError(errno.ENOSPC, "No space left on device"), KeyboardInterrupt()])
def test_no_temporary_file_outlives_a_failed_write(tmp_path, monkeypatch, failure):
    path = tmp_path / "out.json"
    path.write_text("before", encoding="utf-8")

    def fail(_fd: int) -> None:
        raise failure

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(UserError if isinstance(failure, OSError) else KeyboardInterrupt) as caught:
        write_output(path, "after")
    if isinstance(failure, OSError):
        assert "No space left" in caught.value.message and caught.value.hint
    assert path.read_text(encoding="utf-8") == "before"
    assert _leftovers(tmp_path) == []


def test_appending_refuses_a_pipe_without_waiting_for_a_reader(tmp_path):
    pipe = _fifo(tmp_path / "results.jsonl")
    with pytest.raises(UserError, match="named pipe"), open_append(pipe):
        pass
    with open_append(tmp_path / "log.txt") as handle:
        handle.write("one\n")
    with open_append(tmp_path / "log.txt") as handle:
        handle.write("two\n")
    assert (tmp_path / "log.txt").read_text(encoding="utf-8") == "one\ntwo\n"


def test_a_build_round_is_not_spilled_over_a_pipe(tmp_path):
    db = tmp_path / "reg.duckdb"
    pipe = _fifo(Path(f"{db}.build-7.round.json"))
    assert write_spill(db, 7, 1, "design", {"x": 1}) is None
    assert stat.S_ISFIFO(pipe.lstat().st_mode)
    assert _leftovers(tmp_path) == []
    pipe.unlink()
    written = write_spill(db, 7, 1, "design", {"x": 1})
    assert written is not None and json.loads(written.read_text(encoding="utf-8"))["state"] == {"x": 1}


def test_tree_export_refuses_a_pipe(cli, registry_db, tmp_path):
    tree = {"format": "a2x-tree", "version": 1, "root": {"name": "All", "description": "Everything.",
                                                         "services": ["weather", "news"]}}
    (tmp_path / "tree-in.json").write_text(json.dumps(tree), encoding="utf-8")
    assert cli("tree", "import", str(tmp_path / "tree-in.json"), "--allow-missing").code == 0
    pipe = _fifo(tmp_path / "tree.json")
    result = cli("tree", "export", "--out", str(pipe))
    assert result.code == 1, result.err
    assert "named pipe" in result.err and "hint:" in result.err and "Traceback" not in result.err
    assert stat.S_ISFIFO(pipe.lstat().st_mode)


def test_nightly_refuses_a_report_path_that_is_a_folder_before_any_work(cli, registry_db, tmp_path):
    folder = tmp_path / "reports"
    folder.mkdir()
    result = cli("nightly", "--source", str(tmp_path / "missing.json"), "--report", str(folder), "--model", "m")
    assert result.code == 1, result.err
    assert "is a folder, not a regular file" in result.err and "hint:" in result.err
    assert list(folder.iterdir()) == [] and _leftovers(tmp_path) == []


def test_no_module_renames_or_opens_for_writing_on_its_own():
    """The one writer is outfiles.py: elsewhere no os.replace/rename of files, no open(..., "w"/"a"), no
    write_text/write_bytes/savefig to a path (the index folder's own scratch files are the one exception)."""
    allowed = {"outfiles.py", "index.py"}   # index.py: files inside its own fresh scratch folder
    # delivery/ assembles a bundle inside a fresh ".partial" folder it created and renames it into an absent or empty
    # folder; its archives go to paths checked first (output_target, or refused when anything is there).
    fresh_folders = ROOT / "a2x_local" / "delivery"
    offenders = []
    for path in (ROOT / "a2x_local").rglob("*.py"):
        if path.name in allowed or path.is_relative_to(fresh_folders):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            name = node.func.attr
            to_path = name == "savefig" and not (node.args and isinstance(node.args[0], ast.Name)
                                                 and node.args[0].id == "buffer")
            if name in ("write_text", "write_bytes") or to_path or (name == "replace" and _is_os(node.func)):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}")
            elif name == "open" and any(isinstance(a, ast.Constant) and a.value in ("w", "a", "wb", "ab")
                                        for a in node.args):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} open")
    assert offenders == []


def _is_os(func: ast.Attribute) -> bool:
    return isinstance(func.value, ast.Name) and func.value.id == "os"
