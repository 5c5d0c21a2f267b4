"""Hostile model archives and folders (issue 32, findings 2-8 and 13): `models verify` vouches only for an archive
whose every member is a regular file or folder strictly inside `NAME/`, and for a folder whose every model file is
a regular file inside it and listed; manifests are read bounded and checked field by field; sizes are checked
against the tar headers before anything is hashed; loops, special files and huge claims never tie it up; names
given to `models pack` are one path segment."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import stat
import subprocess
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from a2x_local.delivery import ModelToPack, model_pack, pack_model, verify_model
from a2x_local.delivery.model_files import sparse_problem
from a2x_local.delivery.model_pack import MAX_MEMBERS, MAX_PROBLEMS
from a2x_local.errors import InputError, UserError
from tests.support.processes import cli_command, python_command, tree_env

MANIFEST = "a2x-model-manifest.json"
CONFIG = b'{"architectures": ["X"]}'
WEIGHTS = bytes(range(256)) * 64


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def entry(path: str, data: bytes) -> dict[str, Any]:
    return {"path": path, "bytes": len(data), "sha256": sha(data)}


def manifest_of(name: str, files: list[dict[str, Any]], **changes: Any) -> dict[str, Any]:
    manifest = {"format": "a2x-model-pack", "version": 1, "name": name, "alias": None, "checked_with": {},
                "created_at": "2026-01-01T00:00:00Z", "files": files,
                "total_bytes": sum(f["bytes"] for f in files
                                   if isinstance(f, dict) and isinstance(f.get("bytes"), int))}
    manifest.update(changes)
    return manifest


def write_tar(path: Path, members: list[tuple[str, bytes]], *, kind: dict[str, bytes] | None = None) -> Path:
    """A tar of (member name, data); ``kind`` gives some members another type (tarfile.SYMTYPE, ...)."""
    kind = kind or {}
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.type = kind.get(name, tarfile.REGTYPE)
            if info.type == tarfile.SYMTYPE or info.type == tarfile.LNKTYPE:
                info.linkname = data.decode()
                tar.addfile(info)
                continue
            if info.type != tarfile.REGTYPE:
                tar.addfile(info)
                continue
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def model_tar(path: Path, name: str, files: dict[str, bytes], *, listed: dict[str, bytes] | None = None,
              member_prefix: str | None = None, manifest: dict[str, Any] | None = None) -> Path:
    """An archive as `models pack` writes it, with ``files`` as members under ``member_prefix`` (default NAME/)
    and a manifest listing ``listed`` (default: the same files)."""
    listed = files if listed is None else listed
    prefix = f"{name}/" if member_prefix is None else member_prefix
    manifest = manifest or manifest_of(name, [entry(rel, data) for rel, data in listed.items()])
    members = [(f"{prefix}{rel}", data) for rel, data in files.items()]
    members.append((f"{name}/{MANIFEST}", json.dumps(manifest).encode()))
    return write_tar(path, members)


def refused(path: Path) -> str:
    """What verify says about a hostile archive or folder: an error, or a report that is not intact."""
    try:
        report = verify_model(path)
    except UserError as exc:
        return exc.message
    assert not report.ok, f"{path} was reported intact: {report.to_dict()}"
    return "\n".join(report.problems)


@pytest.fixture
def model_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "My-Model"
    folder.mkdir()
    (folder / "config.json").write_bytes(CONFIG)
    (folder / "model.safetensors").write_bytes(WEIGHTS)
    (folder / "tokenizer.json").write_text("{}")
    return folder


def unpacked(model_folder: Path, tmp_path: Path) -> Path:
    report = pack_model(ModelToPack(model_folder, "my-model"), tmp_path / "out")
    with tarfile.open(report.archive) as tar:
        tar.extractall(tmp_path / "far", filter="data")
    folder = tmp_path / "far" / "my-model"
    assert verify_model(folder).ok
    return folder


def gnu_tar_or_skip() -> str:
    tar = shutil.which("tar")
    if tar is None or "GNU tar" not in subprocess.run([tar, "--version"], capture_output=True, text=True).stdout:
        pytest.skip("GNU tar is needed to write sparse members")
    return tar


# --- finding 2: archives that reach outside their folder -------------------------------------------------------

@pytest.mark.parametrize("member", ["m/../../escaped", "/tmp/escaped", "m/sub/../../escaped"])
def test_verify_refuses_members_that_leave_the_folder(tmp_path: Path, member: str):
    rel = member.removeprefix("m/")
    files = {"config.json": CONFIG, "model.safetensors": WEIGHTS}
    archive = model_tar(tmp_path / "m.tar", "m", files, listed={**files, rel: b"x"})
    with tarfile.open(archive, "a") as tar:
        info = tarfile.TarInfo(member)
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    said = refused(archive)
    assert "escaped" in said, said


def test_verify_refuses_an_archive_whose_folder_is_dot_dot(tmp_path: Path):
    """`models pack --name ..` wrote every member as `../x`; such an archive is not intact however it was made."""
    files = {"config.json": CONFIG, "model.safetensors": WEIGHTS}
    archive = model_tar(tmp_path / "dots.tar", "..", files)
    said = refused(archive)
    assert ".." in said, said


@pytest.mark.parametrize("kind", [tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.FIFOTYPE, tarfile.CHRTYPE])
def test_verify_refuses_members_that_are_no_regular_file(tmp_path: Path, kind: bytes):
    files = {"config.json": CONFIG, "model.safetensors": WEIGHTS}
    archive = model_tar(tmp_path / "m.tar", "m", files)
    with tarfile.open(archive, "a") as tar:
        info = tarfile.TarInfo("m/model-00002-of-00002.safetensors")
        info.type = kind
        info.linkname = "/etc/passwd" if kind in (tarfile.SYMTYPE, tarfile.LNKTYPE) else ""
        tar.addfile(info)
    said = refused(archive)
    assert "model-00002-of-00002.safetensors" in said and "regular file" in said, said


# --- finding 3: folder verify trusts the manifest's paths -------------------------------------------------------

@pytest.mark.parametrize("listed", ["/etc/hostname", "../outside.bin", "sub/../../outside.bin"])
def test_folder_verify_refuses_manifest_paths_outside_the_folder(tmp_path: Path, listed: str):
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"not the model")
    target = Path("/etc/hostname") if listed.startswith("/") else outside
    data = target.read_bytes()
    folder = tmp_path / "empty-model"
    folder.mkdir()
    (folder / MANIFEST).write_text(json.dumps(manifest_of("empty-model", [entry(listed, data)])))
    said = refused(folder)
    assert listed in said or "outside" in said, said


def test_folder_verify_refuses_a_model_file_the_manifest_does_not_list(model_folder: Path, tmp_path: Path):
    folder = unpacked(model_folder, tmp_path)
    (folder / "model-00002-of-00002.safetensors").write_bytes(b"more weights")
    manifest = json.loads((folder / MANIFEST).read_text())
    manifest["files"] = [f for f in manifest["files"] if f["path"] != "tokenizer.json"]
    manifest["total_bytes"] = sum(f["bytes"] for f in manifest["files"])
    (folder / MANIFEST).write_text(json.dumps(manifest))
    said = refused(folder)
    assert "model-00002-of-00002.safetensors" in said and "tokenizer.json" in said, said


def test_a_manifest_that_lists_no_model_is_not_intact(tmp_path: Path):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "README.md").write_text("hello")
    (folder / MANIFEST).write_text(json.dumps(manifest_of("notes", [entry("README.md", b"hello")])))
    said = refused(folder)
    assert "config.json" in said, said


# --- finding 4: special files -----------------------------------------------------------------------------------

def test_folder_verify_refuses_a_named_pipe_named_like_a_shard(model_folder: Path, tmp_path: Path):
    folder = unpacked(model_folder, tmp_path)
    os.mkfifo(folder / "model-00002-of-00002.safetensors")
    said = refused(folder)
    assert "model-00002-of-00002.safetensors" in said and "named pipe" in said, said


@pytest.mark.parametrize("listed", [False, True])
def test_folder_verify_refuses_a_device_named_like_a_shard(model_folder: Path, tmp_path: Path, listed: bool):
    folder = unpacked(model_folder, tmp_path)
    shard = folder / ("model.safetensors" if listed else "model-00002-of-00002.safetensors")
    shard.unlink(missing_ok=True)
    try:
        os.mknod(shard, 0o600 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero's numbers
    except PermissionError:
        os.symlink("/dev/zero", shard)
    started = time.monotonic()
    said = refused(folder)
    assert shard.name in said and time.monotonic() - started < 10, said


def test_pack_refuses_special_files_and_links_that_leave_the_folder(model_folder: Path, tmp_path: Path):
    os.mkfifo(model_folder / "model-00002-of-00002.safetensors")
    with pytest.raises(UserError, match="named pipe"):
        pack_model(ModelToPack(model_folder, "m"), tmp_path / "out")
    (model_folder / "model-00002-of-00002.safetensors").unlink()
    os.symlink("/etc/hostname", model_folder / "vocab.json")
    with pytest.raises(UserError, match="outside the model folder"):
        pack_model(ModelToPack(model_folder, "m"), tmp_path / "out")
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []


# --- finding 5: symbolic link loops -----------------------------------------------------------------------------

@pytest.mark.timeout(600)
@pytest.mark.parametrize("command", ["pack", "verify"])
def test_link_loops_neither_hang_pack_nor_verify(model_folder: Path, tmp_path: Path, command: str):
    folder = unpacked(model_folder, tmp_path) if command == "verify" else model_folder
    os.symlink(".", folder / "loop")
    (folder / "sub").mkdir()
    os.symlink("..", folder / "sub" / "up")
    code = ("import sys; from pathlib import Path\n"
            "from a2x_local.delivery import ModelToPack, pack_model, verify_model\n"
            "from a2x_local.errors import UserError\n"
            "try:\n"
            "    if sys.argv[1] == 'pack': pack_model(ModelToPack(Path(sys.argv[2]), 'm'), Path(sys.argv[3]))\n"
            "    else: r = verify_model(Path(sys.argv[2])); print('OK' if r.ok else 'NOT OK', *r.problems)\n"
            "except UserError as e: print('ERROR', e.message)\n")
    try:
        done = subprocess.run(python_command(code, command, str(folder), str(tmp_path / "out")), env=tree_env(),
                              capture_output=True, text=True, timeout=180)
    except subprocess.TimeoutExpired:
        pytest.fail(f"models {command} still walked a link loop after 180 s")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith(("ERROR", "NOT OK")) and "loop" in done.stdout, done.stdout


# --- finding 6: unbounded manifest reads ------------------------------------------------------------------------

def test_a_huge_sparse_manifest_member_is_refused_by_its_header(tmp_path: Path):
    tar_command = gnu_tar_or_skip()
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_bytes(CONFIG)
    with (folder / MANIFEST).open("wb") as handle:
        handle.truncate(1 << 30)   # 1 GiB, all holes
    subprocess.run([tar_command, "--sparse", "-cf", "sparse.tar", "m"], cwd=tmp_path, check=True)
    assert (tmp_path / "sparse.tar").stat().st_size < 1 << 20
    with pytest.raises(InputError, match=r"over the limit|sparse"):
        verify_model(tmp_path / "sparse.tar")


def test_a_huge_manifest_beside_the_archive_is_refused_bounded(model_folder: Path, tmp_path: Path):
    report = pack_model(ModelToPack(model_folder, "my-model"), tmp_path / "out")
    with report.manifest.open("r+b") as handle:
        handle.truncate(1 << 30)
    with pytest.raises(InputError, match="over the limit"):
        verify_model(report.archive)


def test_a_named_pipe_beside_the_archive_is_refused_at_once(model_folder: Path, tmp_path: Path):
    report = pack_model(ModelToPack(model_folder, "my-model"), tmp_path / "out")
    report.manifest.unlink()
    os.mkfifo(report.manifest)
    code = ("import sys; from pathlib import Path; from a2x_local.delivery import verify_model\n"
            "from a2x_local.errors import UserError\n"
            "try: print(verify_model(Path(sys.argv[1])).ok)\n"
            "except UserError as e: print('ERROR', e.message)\n")
    try:
        done = subprocess.run(python_command(code, str(report.archive)), env=tree_env(), capture_output=True,
                              text=True, timeout=180)
    except subprocess.TimeoutExpired:
        pytest.fail("verify blocked on the named pipe beside the archive")
    assert done.stdout.startswith("ERROR") and "named pipe" in done.stdout, done.stdout + done.stderr[-1000:]


# --- finding 7: malformed manifests and truncated archives are explained, never a traceback ------------------------

@pytest.mark.parametrize(("files", "field"), [
    ([1], "files[0]"),
    ([{"path": "config.json", "bytes": "abc", "sha256": "0" * 64}], "bytes"),
    ([{"bytes": 3, "sha256": "0" * 64}], "path"),
    ([{"path": "config.json", "bytes": 3, "sha256": "zz"}], "sha256"),
    ("config.json", "files"),
])
def test_malformed_manifests_name_the_archive_member_entry_and_field(tmp_path: Path, files: Any, field: str):
    archive = model_tar(tmp_path / "m.tar", "m", {"config.json": CONFIG},
                        manifest=manifest_of("m", files, total_bytes=3))
    with pytest.raises(InputError) as caught:
        verify_model(archive)
    message = caught.value.message
    assert str(archive) in message and MANIFEST in message and field in message, message


def test_a_malformed_manifest_in_a_folder_names_the_file_entry_and_field(model_folder: Path, tmp_path: Path):
    folder = unpacked(model_folder, tmp_path)
    manifest = json.loads((folder / MANIFEST).read_text())
    manifest["files"][1]["bytes"] = -5
    (folder / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(InputError) as caught:
        verify_model(folder)
    assert str(folder / MANIFEST) in caught.value.message and "bytes" in caught.value.message
    assert "files[1]" in caught.value.message


@pytest.mark.parametrize("cut", ["inside a member", "inside a header"])
def test_a_truncated_archive_is_not_intact_and_no_traceback(model_folder: Path, tmp_path: Path, cut: str):
    report = pack_model(ModelToPack(model_folder, "my-model"), tmp_path / "out")
    with tarfile.open(report.archive) as tar:
        member = tar.getmember("my-model/model.safetensors")
        manifest_member = tar.getmember(f"my-model/{MANIFEST}")
    data = report.archive.read_bytes()
    end = member.offset_data + 1000 if cut == "inside a member" else manifest_member.offset + 100
    report.archive.write_bytes(data[:end])
    said = refused(report.archive)
    assert "truncated" in said or "missing" in said or MANIFEST in said, said


# --- finding 8: tiny archives that would tie verify up ----------------------------------------------------------

@pytest.mark.timeout(600)
def test_a_sparse_terabyte_weight_is_refused_before_hashing(tmp_path: Path):
    tar_command = gnu_tar_or_skip()
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_bytes(CONFIG)
    with (folder / "model.safetensors").open("wb") as handle:
        handle.truncate(1 << 40)
    huge = {"path": "model.safetensors", "bytes": 1 << 40,
            "sha256": "0" * 64}
    (folder / MANIFEST).write_text(json.dumps(manifest_of("m", [entry("config.json", CONFIG), huge])))
    subprocess.run([tar_command, "--sparse", "-cf", "m.tar", "m"], cwd=tmp_path, check=True)
    (folder / "model.safetensors").unlink()
    code = ("import sys; from pathlib import Path; from a2x_local.delivery import verify_model\n"
            "from a2x_local.errors import UserError\n"
            "try: r = verify_model(Path(sys.argv[1])); print('OK' if r.ok else 'NOT OK', *r.problems)\n"
            "except UserError as e: print('ERROR', e.message)\n")
    try:
        done = subprocess.run(python_command(code, str(tmp_path / "m.tar")), env=tree_env(), capture_output=True,
                              text=True, timeout=180)
    except subprocess.TimeoutExpired:
        pytest.fail("verify hashed a 1 TiB sparse member of a 10 KB archive")
    assert done.stdout.startswith(("ERROR", "NOT OK")) and "model.safetensors" in done.stdout, done.stdout



def sparse_model_folder(tmp_path: Path) -> Path:
    """An unpacked model whose weights became a 1 TiB file of holes, with a manifest that lists it at that size."""
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_bytes(CONFIG)
    with (folder / "model.safetensors").open("wb") as handle:
        handle.truncate(1 << 40)
    if os.stat(folder / "model.safetensors").st_blocks * 512 > 1 << 20:
        pytest.skip("this file system does not keep sparse files")
    huge = {"path": "model.safetensors", "bytes": 1 << 40, "sha256": "0" * 64}
    (folder / MANIFEST).write_text(json.dumps(manifest_of("m", [entry("config.json", CONFIG), huge])))
    return folder


@pytest.mark.timeout(600)
def test_folder_verify_refuses_a_sparse_terabyte_weight_in_seconds(tmp_path: Path):
    """Only archives were bounded: verify of the unpacked folder hashed the 1 TiB of holes (minutes, then hours)."""
    folder = sparse_model_folder(tmp_path)
    started = time.monotonic()
    try:
        done = subprocess.run(cli_command("models", "verify", str(folder)), env=tree_env(), capture_output=True,
                              text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("models verify still hashed a 1 TiB sparse file of a model folder after 120 s")
    took = time.monotonic() - started
    assert done.returncode == 1, done.stdout + done.stderr
    assert "model.safetensors: a sparse file (1,099,511,627,776 bytes, " in done.stdout, done.stdout
    assert "Traceback" not in done.stderr and "this is a bug" not in done.stderr
    assert took < 60, f"verify took {took:.0f} s"


def test_pack_refuses_a_sparse_file_before_reading_it(tmp_path: Path):
    folder = sparse_model_folder(tmp_path)
    (folder / MANIFEST).unlink()
    with pytest.raises(UserError, match=r"model\.safetensors: a sparse file"):
        pack_model(ModelToPack(folder, "m"), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_sparse_files_are_told_apart_from_whole_ones(tmp_path: Path):
    """A whole file (written, 2 MiB) and a file with one hole at its end are judged by what is on disk."""
    whole, holed = tmp_path / "whole.safetensors", tmp_path / "holed.safetensors"
    whole.write_bytes(os.urandom(2 << 20))
    with holed.open("wb") as handle:
        handle.write(os.urandom(1 << 20))
        handle.truncate(64 << 20)
    assert sparse_problem(str(whole), os.stat(whole), "whole.safetensors") is None
    with holed.open("rb") as handle:      # an open descriptor, as verify passes it
        said = sparse_problem(handle.fileno(), os.fstat(handle.fileno()), "holed.safetensors")
    assert said is not None and "a hole at byte 1,048,576" in said, said


def test_a_folder_with_large_whole_weights_verifies(tmp_path: Path):
    folder = tmp_path / "big"
    folder.mkdir()
    (folder / "config.json").write_bytes(CONFIG)
    (folder / "model.safetensors").write_bytes(os.urandom(3 << 20))
    report = pack_model(ModelToPack(folder, "big"), tmp_path / "out")
    assert verify_model(report.archive).ok
    with tarfile.open(report.archive) as tar:
        tar.extractall(tmp_path / "far", filter="data")
    assert verify_model(tmp_path / "far" / "big").ok

def test_a_member_larger_than_the_archive_is_refused_before_hashing(tmp_path: Path):
    files = {"config.json": CONFIG, "model.safetensors": WEIGHTS}
    archive = model_tar(tmp_path / "m.tar", "m", files)
    data = bytearray(archive.read_bytes())
    with tarfile.open(archive) as tar:
        member = tar.getmember("m/model.safetensors")
    # The size field of the member's ustar header (octal, 12 bytes at 124), and its checksum, say 4 GiB.
    header = member.offset if member.offset_data - member.offset == 512 else member.offset_data - 512
    data[header + 124:header + 136] = b"%011o\0" % (1 << 32)
    data[header + 148:header + 156] = b" " * 8
    data[header + 148:header + 155] = b"%06o\0" % sum(data[header:header + 512])
    archive.write_bytes(bytes(data))
    said = refused(archive)
    assert "model.safetensors" in said, said


def test_too_many_members_are_refused_at_once(tmp_path: Path):
    files = {"config.json": CONFIG, "model.safetensors": WEIGHTS}
    members = [(f"m/{rel}", data) for rel, data in files.items()]
    members += [(f"m/empty/{n}", b"") for n in range(MAX_MEMBERS + 1)]
    members.append((f"m/{MANIFEST}", json.dumps(manifest_of("m", [entry(r, d) for r, d in files.items()])).encode()))
    archive = write_tar(tmp_path / "many.tar", members)
    with pytest.raises(InputError, match=f"more than {MAX_MEMBERS:,} members"):
        verify_model(archive)


def test_the_problem_list_is_capped_with_a_count_of_the_rest(tmp_path: Path):
    files = {"config.json": CONFIG, "model.safetensors": WEIGHTS}
    extra = {f"junk/{n}.bin": b"" for n in range(MAX_PROBLEMS + 40)}
    archive = model_tar(tmp_path / "m.tar", "m", {**files, **extra}, listed=files)
    report = verify_model(archive)
    assert not report.ok and len(report.problems) == MAX_PROBLEMS and report.more_problems == 40
    assert report.to_dict()["more_problems"] == 40


# --- finding 13: names given to `models pack` ---------------------------------------------------------------------

@pytest.mark.parametrize("name", ["../escaped", "a/b", "..", ".", ".hidden", "-rf", "", "x\x1b[2J", "a\\b"])
def test_pack_refuses_a_name_that_is_not_one_plain_path_segment(model_folder: Path, tmp_path: Path, name: str):
    out = tmp_path / "out" / "inner"
    with pytest.raises(UserError, match="name"):
        pack_model(ModelToPack(model_folder, name), out)
    assert not (tmp_path / "out" / "escaped.tar").exists() and not (tmp_path / "escaped.tar").exists()
    assert not out.exists() or list(out.iterdir()) == []


def test_pack_and_verify_accept_ordinary_model_names(model_folder: Path, tmp_path: Path):
    for name in ("Qwen2.5-7B-Instruct", "tiny_qwen2", "Modèle 7B"):
        report = pack_model(ModelToPack(model_folder, name), tmp_path / "out")
        assert verify_model(report.archive).ok


# --- issue 32, fourth round: what the third round's probes of the same classes found ------------------------------

FILES = {"config.json": CONFIG, "model.safetensors": WEIGHTS}


def directory(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    return info


def regular(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def raw_tar(path: Path, parts: list[tuple[tarfile.TarInfo, bytes | int]], *, fmt: int = tarfile.PAX_FORMAT) -> Path:
    """A tar written header by header: data as bytes, or an int of bytes left as a hole (seeked over)."""
    with path.open("wb") as out:
        for info, data in parts:
            out.write(info.tobuf(fmt, "utf-8", "surrogateescape"))
            if isinstance(data, int):
                out.seek(-(-data // 512) * 512, os.SEEK_CUR)
            else:
                out.write(data + b"\0" * (-len(data) % 512))
        out.write(b"\0" * 1024)
        out.truncate()
    return path


def extended(kind: bytes, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    """A GNU long name (L) or pax (x) header of ``data``, as tarfile reads it before the member it names."""
    info = tarfile.TarInfo("././@LongLink")
    info.type, info.size = kind, len(data)
    return info, data


def with_manifest(name: str, parts: list[tuple[tarfile.TarInfo, bytes | int]],
                  files: dict[str, bytes] = FILES) -> list[tuple[tarfile.TarInfo, bytes | int]]:
    manifest = json.dumps(manifest_of(name, [entry(rel, data) for rel, data in files.items()])).encode()
    return [*(regular(f"{name}/{rel}", data) for rel, data in files.items()), *parts,
            regular(f"{name}/{MANIFEST}", manifest)]


@pytest.mark.parametrize("shape", ["a folder after the file", "a folder before the file", "the folder twice",
                                   "a member inside a file"])
def test_members_sharing_a_name_whatever_their_types_are_not_intact(tmp_path: Path, shape: str):
    """Before: `m/config.json` (right hash) followed by a folder of that name was intact (the folder was skipped
    before the duplicate check); unpacked, the folder stands where the config was."""
    parts: dict[str, list[tuple[tarfile.TarInfo, bytes | int]]] = {
        "a folder after the file": [(directory("m/config.json"), b"")],
        "a folder before the file": [],
        "the folder twice": [(directory("m"), b""), (directory("m"), b"")],
        "a member inside a file": [regular("m/config.json/x", b"x")],
    }
    members = with_manifest("m", parts[shape])
    if shape == "a folder before the file":
        members.insert(0, (directory("m/config.json"), b""))
    said = refused(raw_tar(tmp_path / "m.tar", members))
    expected = "inside 'm/config.json', which the archive holds as a file" if shape == "a member inside a file" \
        else "appears twice in the archive"
    assert expected in said, said


HOLE_BYTES = 4 << 20


def archive_with_a_hole(tmp_path: Path) -> tuple[Path, bytes]:
    """An archive whose 4 MiB member is all holes (skipped when written), its true hash (of zeros) listed; and the
    manifest it holds."""
    listed = {**FILES, "model-00002.safetensors": bytes(HOLE_BYTES)}
    manifest = json.dumps(manifest_of("m", [entry(rel, data) for rel, data in listed.items()])).encode()
    hole = tarfile.TarInfo("m/model-00002.safetensors")
    hole.size = HOLE_BYTES
    archive = raw_tar(tmp_path / "m.tar", [*(regular(f"m/{rel}", data) for rel, data in FILES.items()),
                                           (hole, HOLE_BYTES), regular(f"m/{MANIFEST}", manifest)])
    return archive, manifest


def test_a_sparse_archive_is_refused_before_a_member_is_hashed(tmp_path: Path):
    """Before: a tar with holes (276 KB on disk claiming 1 TiB) had its holes hashed; here a 4 MiB member of holes
    whose true hash (of zeros) the manifest lists was intact. Now the archive itself is refused as sparse."""
    archive, _ = archive_with_a_hole(tmp_path)
    if sparse_problem(str(archive), os.stat(archive), "m.tar") is None:
        pytest.skip("this file system does not report holes")
    with pytest.raises(InputError, match="is a sparse file") as caught:
        verify_model(archive)
    assert str(archive) in caught.value.message


def test_members_are_bounded_by_the_archive_s_blocks_where_holes_cannot_be_told(tmp_path: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch):
    """Where the file system cannot report holes (SEEK_HOLE finds none), the blocks it allocated still tell: members
    claiming more than twice what the archive holds on disk are refused before a byte is hashed."""
    archive, manifest = archive_with_a_hole(tmp_path)
    if not 0 < os.stat(archive).st_blocks * 512 * 2 < HOLE_BYTES:
        pytest.skip("this file system wrote the hole out (or reports no blocks)")
    monkeypatch.setattr(model_pack, "hole_at", lambda *_: None)
    started: list[str] = []       # verify opens its progress bar only when it starts hashing

    def progress(label: str, total: int):
        started.append(label)
        return lambda done: None

    with pytest.raises(InputError, match="bytes on disk") as caught:
        verify_model(archive, progress)
    claimed = HOLE_BYTES + len(CONFIG) + len(WEIGHTS) + len(manifest)
    assert str(archive) in caught.value.message and f"claim {claimed:,} bytes" in caught.value.message, \
        caught.value.message
    assert not started


@pytest.mark.parametrize("kind", [tarfile.GNUTYPE_LONGNAME, tarfile.XHDTYPE])
def test_an_extended_header_over_the_bound_is_refused_before_it_is_read(tmp_path: Path, kind: bytes):
    """Before: tarfile read a GNU long name or a pax header whole, in one read of the size its header claims (1 GiB
    of holes: 1.13 GB RSS). Now no read over 1 MiB is made: refused naming the archive, the header's place and size.
    (Here 2 MiB of real bytes, so that the archive is not sparse.)"""
    big = b"p" * (2 << 20) if kind == tarfile.GNUTYPE_LONGNAME else b"2097174 comment=" + b"p" * (2097174 - 17) + b"\n"
    archive = raw_tar(tmp_path / "m.tar", with_manifest("m", [extended(kind, big), regular("m/x", b"x")]))
    with pytest.raises(InputError, match="extended header") as caught:
        verify_model(archive)
    assert str(archive) in caught.value.message and f"{-(-len(big) // 512) * 512:,} bytes" in caught.value.message


def pax_record(key: str, value: str) -> bytes:
    """One pax attribute, `LEN key=value` with LEN counting itself."""
    body = f" {key}={value}\n".encode()
    size = len(body) + 1
    while len(str(size)) + len(body) != size:
        size += 1
    return str(size).encode() + body


@pytest.mark.parametrize(("record", "said"), [
    (pax_record("path", "m/" + "d/" * 2500 + "x"), "over the 4,096 any path may be"),
    (pax_record("comment", "c" * (20 << 10)), "bytes of pax attributes, over the 16,384"),
])
def test_names_and_pax_attributes_are_bounded_per_member(tmp_path: Path, record: bytes, said: str):
    """Within the 1 MiB a single read may take, 10,000 members could still carry gigabytes of names and attributes,
    all held at once: each member's are bounded, and refused at the member."""
    archive = raw_tar(tmp_path / "m.tar", with_manifest("m", [extended(tarfile.XHDTYPE, record), regular("m/x", b"")]))
    with pytest.raises(InputError, match=said) as caught:
        verify_model(archive)
    assert str(archive) in caught.value.message


def test_an_empty_long_name_is_named_by_where_it_lies(tmp_path: Path):
    """Before: a GNU long name of nothing gave a problem starting ": outside the archive's folder"."""
    archive = raw_tar(tmp_path / "m.tar", with_manifest("m", [extended(tarfile.GNUTYPE_LONGNAME, b"\0"),
                                                              regular("m/x", b"x")]), fmt=tarfile.GNU_FORMAT)
    said = refused(archive)
    assert "(its name is empty)" in said and "the member at byte" in said, said


@pytest.mark.parametrize("kind", [tarfile.GNUTYPE_LONGNAME, tarfile.XHDTYPE])
def test_a_chain_of_extended_headers_is_an_error_naming_the_archive(tmp_path: Path, kind: bytes):
    """Before: 5,000 chained long names or pax headers gave "the input is nested too deeply to process" (tarfile
    recurses once per header), naming no file."""
    body = b"m/abc\0" if kind == tarfile.GNUTYPE_LONGNAME else b"14 path=m/abc\n"
    archive = raw_tar(tmp_path / "m.tar", with_manifest("m", [*[extended(kind, body)] * 1500, regular("m/x", b"")]))
    with pytest.raises(InputError, match="chain of hundreds of extended headers") as caught:
        verify_model(archive)
    assert str(archive) in caught.value.message


def test_a_manifest_number_of_thousands_of_digits_names_the_archive_and_field(tmp_path: Path):
    """Before: "unexpected ValueError: Exceeds the limit (4300 digits) ... this is a bug"."""
    manifest = json.dumps(manifest_of("m", [entry(rel, data) for rel, data in FILES.items()]))
    manifest = manifest.replace(f'"bytes": {len(CONFIG)}', '"bytes": ' + "9" * 5000)
    archive = write_tar(tmp_path / "m.tar", [*((f"m/{rel}", data) for rel, data in FILES.items()),
                                             (f"m/{MANIFEST}", manifest.encode())])
    with pytest.raises(InputError, match="holds an integer of more than 4,300 digits at line 1") as caught:
        verify_model(archive)
    assert f"{archive}:m/{MANIFEST}" in caught.value.message and "field 'files[0].bytes'" in caught.value.message


@pytest.mark.parametrize("where", ["folder", "beside the archive"])
def test_a_manifest_that_is_a_link_is_refused(model_folder: Path, tmp_path: Path, where: str):
    """Before: a folder's manifest linked to one outside it (describing a folder with these files) said intact,
    and the manifest beside an archive was followed the same way."""
    elsewhere = tmp_path / "elsewhere.json"
    if where == "folder":
        target = unpacked(model_folder, tmp_path) / MANIFEST
        checked = target.parent
    else:
        report = pack_model(ModelToPack(model_folder, "my-model"), tmp_path / "out")
        target, checked = report.manifest, report.archive
    shutil.copy(target, elsewhere)
    target.unlink()
    os.symlink(elsewhere, target)
    with pytest.raises(InputError, match="is a symbolic link") as caught:
        verify_model(checked)
    assert str(target) in caught.value.message


@pytest.mark.timeout(120)
def test_models_check_opens_nothing_while_a_named_pipe_is_in_the_folder(model_folder: Path):
    """Before: `models check` (and `models pack`, which runs it first) hung forever on a FIFO named like a shard:
    safetensors opened it (holding the GIL, so the check runs in a child). A watcher here opens the pipe's other end
    whenever a reader waits (freeing the old code), and records it: no reader may ever wait."""
    fifo = model_folder / "model-00002-of-00002.safetensors"
    os.mkfifo(fifo)
    readers: list[float] = []
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.05):
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
                readers.append(time.monotonic())
            except OSError:
                pass                     # ENXIO: nobody has it open for reading

    code = ("import json, sys; from pathlib import Path; from a2x_local.llm.model_check import check_model; "
            "print(json.dumps(check_model(Path(sys.argv[1]), load_tokenizer=False).problems))")
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        done_check = subprocess.run(python_command(code, str(model_folder)), env=tree_env(), capture_output=True,
                                    text=True, timeout=90)
    finally:
        done.set()
        watcher.join()
    assert done_check.returncode == 0, done_check.stderr
    problems = json.loads(done_check.stdout)
    assert not readers, f"the named pipe was opened for reading: {problems}"
    assert any(str(fifo) in problem and "named pipe" in problem for problem in problems), problems


@pytest.mark.parametrize("name", [b"n\xff.txt", b"notes\nconfig.json", b"n\x1b[2J.txt", "a\u202eb.txt".encode()])
def test_pack_refuses_a_file_name_its_verify_would_refuse(model_folder: Path, tmp_path: Path, name: bytes):
    """Before: bytes that are not UTF-8 were "unexpected UnicodeEncodeError ... this is a bug"; a line break, an
    escape or a bidi control was packed, into an archive its own verify then refused. Now pack refuses, naming the
    file escaped, and writes nothing."""
    os.close(os.open(os.fsencode(model_folder) + b"/" + name, os.O_WRONLY | os.O_CREAT, 0o644))
    with pytest.raises(UserError) as caught:
        pack_model(ModelToPack(model_folder, "my-model"), tmp_path / "out")
    shown = repr(name)[2:-1] if b"\xff" in name else repr(name.decode())[1:-1]
    assert f"'{shown}'" in caught.value.message and "rename it" in caught.value.message, caught.value.message
    assert not (tmp_path / "out").exists()


def test_a_name_is_bounded_by_its_bytes_not_only_its_characters(model_folder: Path, tmp_path: Path):
    """Before: 200 CJK characters (600 bytes) passed the 200-character check, then failed with "File name too long"
    and a hint about free space, leaving --out behind empty. Now refused by bytes first; 77 of them (231 bytes) pack."""
    with pytest.raises(UserError, match="is 600 bytes in UTF-8") as caught:
        pack_model(ModelToPack(model_folder, "模" * 200), tmp_path / "out")
    assert caught.value.code == "BadModelName" and not (tmp_path / "out").exists()
    report = pack_model(ModelToPack(model_folder, "模" * 77), tmp_path / "out")
    assert verify_model(report.archive).ok
