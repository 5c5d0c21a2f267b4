"""Only regular files are read, within their size while reading, and a folder walk reports what it does not read
(issue 21, finding 2). The probes that hung or ran out of memory before run in a subprocess with a memory cap and a
time-out, so a regression fails the test instead of the machine."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from a2x_local.errors import InputError
from a2x_local.jsonfiles import read_bytes, read_json
from tests.support.paths import ROOT
from tests.support.registries import snapshot

MEMORY_CAP = 3 << 30


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def a2x(*args: object, db: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`a2x-local ARGS --db DB` in a subprocess capped at 3 GiB of address space and ``timeout`` seconds."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-c", "from a2x_local.cli import main; main()", *map(str, args), "--db", str(db)]
    return subprocess.run(command, cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=timeout, preexec_fn=_capped)


def entry(service_id: str = "svc/a") -> str:
    return json.dumps({"id": service_id, "name": "Alpha", "description": "Does alpha things."}) + "\n"


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_link_to_an_endless_device_is_refused_by_sync_and_nightly(tmp_path, home, registry_db, device):
    link = tmp_path / "export.json"
    link.symlink_to(device)
    before = snapshot(registry_db)
    result = a2x("ingest", "--sync", "--dry-run", link, db=registry_db)
    assert result.returncode == 1, result.stderr[-2000:]
    assert f"export.json (→ {device}): is a character device, not a regular file" in result.stderr
    assert "hint:" in result.stderr and "Traceback" not in result.stderr
    nightly = a2x("nightly", "--source", device, "--model", "m", "--report", tmp_path / "r.json", db=registry_db)
    assert nightly.returncode == 1 and "is a character device" in nightly.stderr, nightly.stderr[-2000:]
    assert json.loads((tmp_path / "r.json").read_text())["status"] == "failed"
    assert snapshot(registry_db) == before


def test_a_named_pipe_given_directly_is_refused_without_waiting_for_a_writer(tmp_path, home, registry_db):
    pipe = tmp_path / "services.jsonl"
    os.mkfifo(pipe)
    result = a2x("ingest", pipe, "--dry-run", db=registry_db, timeout=60)
    assert result.returncode == 1
    assert "services.jsonl: is a named pipe (FIFO), not a regular file" in result.stderr, result.stderr[-2000:]


def test_a_named_pipe_inside_a_folder_fails_the_ingest_naming_it(cli, registry_db, tmp_path):
    folder = tmp_path / "export"
    folder.mkdir()
    (folder / "good.jsonl").write_text(entry(), encoding="utf-8")
    os.mkfifo(folder / "more.jsonl")
    before = snapshot(registry_db)
    result = cli("ingest", folder)
    assert result.code == 1
    assert "more.jsonl: is a named pipe (FIFO), not a regular file" in result.err and "hint:" in result.err
    assert snapshot(registry_db) == before


def test_a_walk_reports_every_entry_it_does_not_read(cli, registry_db, tmp_path):
    folder = tmp_path / "export"
    (folder / "skills" / "pdf").mkdir(parents=True)
    (folder / "good.jsonl").write_text(entry(), encoding="utf-8")
    (folder / "README.txt").write_text("notes", encoding="utf-8")
    os.mkfifo(folder / "pipe")
    (folder / "gone").symlink_to(tmp_path / "nowhere")
    (folder / "skills" / "pdf" / "SKILL.md").write_text("---\nname: pdf\ndescription: Reads PDF files.\n---\nbody\n",
                                                       encoding="utf-8")
    (folder / "skills" / "pdf" / "helper.py").write_text("# part of the skill", encoding="utf-8")
    result = cli("ingest", folder, "--json")
    assert result.code == 0, result.err
    skipped = {Path(s["path"]).name: s["reason"] for s in result.json()["skipped"]}
    assert skipped == {"README.txt": "not a service file (SKILL.md, .json, .jsonl, .csv)",
                       "pipe": "a named pipe (FIFO), not a regular file",
                       "gone": f"a broken symbolic link (to {tmp_path / 'nowhere'})"}
    shown = cli("ingest", folder, "--replace")
    assert "skipped 3 folder entries" in shown.out and "README.txt: not a service file" in shown.out


def test_the_size_is_bounded_while_reading_not_only_by_what_the_file_claims(tmp_path):
    """/proc files claim 0 bytes and hold more: the reader stops at the limit instead of trusting st_size."""
    status = Path("/proc/self/status")
    assert status.stat().st_size == 0 and len(status.read_bytes()) > 100
    with pytest.raises(InputError, match="holds more than the limit of 50 bytes"):
        read_bytes(status, 50)
    assert read_bytes(status, 1 << 20).startswith(b"Name:")


def test_a_folder_and_a_socket_are_refused_with_their_kind(tmp_path):
    import socket

    with pytest.raises(InputError, match="is a folder where a file was expected"):
        read_json(tmp_path)
    path = tmp_path / "s.json"
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(path))
        with pytest.raises(InputError, match=r"s.json: is a socket, not a regular file"):
            read_json(path)
    finally:
        server.close()
