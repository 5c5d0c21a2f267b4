"""A second look at the input classes of issue 32 (delivery), with other names, other archive shapes and other
special files than the findings used: the fixes must hold for the class, not for the examples."""

from __future__ import annotations

import hashlib
import io
import json
import os
import socket
import subprocess
import tarfile
from pathlib import Path

import pytest

from a2x_local.delivery import ModelToPack, pack_model, verify_model
from a2x_local.delivery.checksums import write_sums
from a2x_local.errors import InputError, UserError
from tests.delivery.fake_bundles import make_bundle, run_install
from tests.delivery.test_model_pack_hostile import (
    CONFIG,
    MANIFEST,
    WEIGHTS,
    entry,
    gnu_tar_or_skip,
    manifest_of,
    model_tar,
    refused,
    unpacked,
    write_tar,
)

FILES = {"config.json": CONFIG, "model.safetensors": WEIGHTS}


@pytest.fixture
def model_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "My-Model"
    folder.mkdir()
    for rel, data in {**FILES, "tokenizer.json": b"{}"}.items():
        (folder / rel).write_bytes(data)
    return folder


# --- archives of other shapes -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["m/bad\nname.bin", "m/bidi\u202egnp.safetensors", "m/ctl\x07.bin", "m//double.bin",
                                  "m/./dot.bin", "M/config.json", "m2/config.json", "./m/config.json"])
def test_members_with_other_odd_names_are_not_intact(tmp_path: Path, name: str):
    archive = model_tar(tmp_path / "m.tar", "m", FILES)
    with tarfile.open(archive, "a", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo(name)
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    refused(archive)


def test_a_pax_header_claiming_a_huge_size_is_refused_at_once(tmp_path: Path):
    archive = tmp_path / "m.tar"
    with tarfile.open(archive, "w", format=tarfile.PAX_FORMAT) as tar:
        for rel, data in FILES.items():
            info = tarfile.TarInfo(f"m/{rel}")
            info.size = len(data)
            if rel == "model.safetensors":
                info.pax_headers = {"size": str(1 << 45)}
            tar.addfile(info, io.BytesIO(data))
    with pytest.raises(UserError):
        verify_model(archive)


def test_two_manifests_in_one_archive_are_refused(tmp_path: Path):
    manifest = json.dumps(manifest_of("m", [entry(r, d) for r, d in FILES.items()])).encode()
    archive = write_tar(tmp_path / "m.tar", [*((f"m/{r}", d) for r, d in FILES.items()),
                                             (f"m/{MANIFEST}", manifest), (f"m/{MANIFEST}", manifest)])
    with pytest.raises(InputError, match="2 manifests"):
        verify_model(archive)


def test_a_member_listed_twice_is_not_intact(tmp_path: Path):
    manifest = json.dumps(manifest_of("m", [entry(r, d) for r, d in FILES.items()])).encode()
    archive = write_tar(tmp_path / "m.tar", [*((f"m/{r}", d) for r, d in FILES.items()),
                                             ("m/config.json", b'{"evil": 1}'), (f"m/{MANIFEST}", manifest)])
    assert "twice" in refused(archive)


def test_members_hidden_after_the_end_of_archive_are_found(tmp_path: Path, model_folder: Path):
    report = pack_model(ModelToPack(model_folder, "my-model"), tmp_path / "out")
    hidden = io.BytesIO()
    with tarfile.open(fileobj=hidden, mode="w") as tar:
        info = tarfile.TarInfo("my-model/extra.safetensors")
        info.size = 5
        tar.addfile(info, io.BytesIO(b"extra"))
    with report.archive.open("ab") as archive:
        archive.write(hidden.getvalue())
    assert "bytes" in refused(report.archive)


def test_the_folder_tarred_again_by_gnu_tar_verifies(tmp_path: Path, model_folder: Path):
    """An operator who unpacks, checks and tars the folder again with GNU tar (which writes the folder itself and
    its sub-folders as members) still has an intact archive."""
    tar_command = gnu_tar_or_skip()
    (model_folder / "sub").mkdir()
    (model_folder / "sub" / "tokenizer_config.json").write_text("{}")
    folder = unpacked(model_folder, tmp_path)
    subprocess.run([tar_command, "-cf", str(tmp_path / "again.tar"), "my-model"], cwd=folder.parent, check=True)
    report = verify_model(tmp_path / "again.tar")
    assert report.ok, report.problems


def test_a_gzip_or_empty_file_is_no_model_archive(tmp_path: Path):
    empty = tmp_path / "empty.tar"
    empty.write_bytes(b"")
    with pytest.raises(UserError, match="neither a model archive"):
        verify_model(empty)
    gz = tmp_path / "m.tar.gz"
    with tarfile.open(gz, "w:gz") as tar:
        info = tarfile.TarInfo("m/config.json")
        info.size = len(CONFIG)
        tar.addfile(info, io.BytesIO(CONFIG))
    with pytest.raises(UserError, match="neither a model archive"):
        verify_model(gz)


# --- other special files ----------------------------------------------------------------------------------------

def test_a_manifest_beside_the_archive_that_links_to_a_device_is_refused(tmp_path: Path, model_folder: Path):
    report = pack_model(ModelToPack(model_folder, "my-model"), tmp_path / "out")
    report.manifest.unlink()
    os.symlink("/dev/zero", report.manifest)
    with pytest.raises(InputError, match="is a symbolic link"):      # never followed (issue 32, M5)
        verify_model(report.archive)


@pytest.mark.parametrize("kind", ["fifo", "zero", "huge"])
def test_a_folder_manifest_that_is_no_plain_file_is_refused_bounded(tmp_path: Path, model_folder: Path, kind: str):
    folder = unpacked(model_folder, tmp_path)
    manifest = folder / MANIFEST
    manifest.unlink()
    if kind == "fifo":
        os.mkfifo(manifest)
    elif kind == "zero":
        os.symlink("/dev/zero", manifest)
    else:
        with manifest.open("wb") as handle:
            handle.truncate(1 << 30)
    with pytest.raises(InputError, match=r"named pipe|character device|over the limit|symbolic link"):
        verify_model(folder)


def test_a_subfolder_that_links_outside_is_not_intact(tmp_path: Path, model_folder: Path):
    (model_folder / "sub").mkdir()
    (model_folder / "sub" / "tokenizer_config.json").write_text("{}")
    folder = unpacked(model_folder, tmp_path)
    outside = tmp_path / "elsewhere"
    (folder / "sub").rename(outside)
    os.symlink(outside, folder / "sub")
    said = refused(folder)
    assert "sub" in said and "outside" in said, said


def test_pack_refuses_a_socket_in_the_model_folder(tmp_path: Path, model_folder: Path):
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(model_folder / "model.sock"))
        with pytest.raises(UserError, match="socket"):
            pack_model(ModelToPack(model_folder, "m"), tmp_path / "out")
    finally:
        server.close()


def test_pack_never_writes_through_a_partial_file_someone_left(tmp_path: Path, model_folder: Path):
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("precious")
    os.symlink(victim, out / "m.tar.partial")
    with pytest.raises(UserError, match="already exists"):
        pack_model(ModelToPack(model_folder, "m"), out)
    assert victim.read_text() == "precious" and (out / "m.tar.partial").is_symlink()


def test_pack_into_a_file_is_an_error_not_a_traceback(tmp_path: Path, model_folder: Path):
    out = tmp_path / "out"
    out.write_text("a file")
    with pytest.raises(UserError, match="out"):
        pack_model(ModelToPack(model_folder, "m"), out)


@pytest.mark.parametrize("name", ["   ", "a\u202eb", "x" * 201, "a\x00b", "name\n"])
def test_pack_refuses_other_odd_names(tmp_path: Path, model_folder: Path, name: str):
    with pytest.raises(UserError, match="model name"):
        pack_model(ModelToPack(model_folder, name), tmp_path / "out")


# --- install.sh: other names and special files -------------------------------------------------------------------

def test_a_wheel_named_with_a_line_break_cannot_borrow_a_listed_line(tmp_path: Path):
    bundle = make_bundle(tmp_path / "bundle", "b-one", {"alpha": "1.0"})
    # grep -F takes each line of a pattern as a pattern of its own: the second line, BUNDLE_ID, is listed.
    (bundle / "wheels" / "evil.whl\nBUNDLE_ID").write_bytes(b"smuggled")
    done = run_install(bundle, tmp_path / "venv")
    assert done.returncode == 1 and "wheels/" in done.stderr, done.stderr
    assert not (tmp_path / "venv").exists()


@pytest.mark.parametrize("kind", ["fifo", "link", "folder"])
def test_other_special_entries_in_wheels_are_refused(tmp_path: Path, kind: str):
    bundle = make_bundle(tmp_path / "bundle", "b-one", {"alpha": "1.0"})
    target = bundle / "wheels" / "zeta-1.0-py3-none-any.whl"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "link":
        os.symlink(next((bundle / "wheels").glob("alpha*")), target)
    else:
        target.mkdir()
    try:
        done = run_install(bundle, tmp_path / "venv", timeout=180)
    except subprocess.TimeoutExpired:
        pytest.fail("install.sh blocked on a special file in wheels/")
    assert done.returncode == 1 and "zeta-1.0-py3-none-any.whl" in done.stderr, done.stderr


def test_a_listed_named_pipe_is_refused_before_sha256sum_reads_it(tmp_path: Path):
    bundle = make_bundle(tmp_path / "bundle", "b-one", {"alpha": "1.0"})
    with (bundle / "SHA256SUMS").open("a") as sums:
        sums.write(f"{hashlib.sha256(b'').hexdigest()}  notes.txt\n")
    os.mkfifo(bundle / "notes.txt")
    try:
        done = run_install(bundle, tmp_path / "venv", timeout=180)
    except subprocess.TimeoutExpired:
        pytest.fail("sha256sum blocked on a listed named pipe")
    assert done.returncode == 1 and "notes.txt" in done.stderr and "not a regular file" in done.stderr


@pytest.mark.parametrize("kind", ["link to a foreign folder", "the bundle itself", "a marker folder",
                                  "a marker link"])
def test_other_targets_no_bundle_made_are_refused(tmp_path: Path, kind: str):
    bundle = make_bundle(tmp_path / "bundle", "b-one", {"alpha": "1.0"})
    venv = tmp_path / "venv"
    if kind == "link to a foreign folder":
        (tmp_path / "mine").mkdir()
        (tmp_path / "mine" / "data.txt").write_text("mine")
        os.symlink(tmp_path / "mine", venv)
    elif kind == "the bundle itself":
        venv = bundle
    else:
        venv.mkdir()
        (venv / "data.txt").write_text("mine")
        if kind == "a marker folder":
            (venv / "a2x-local-bundle.txt").mkdir()
        else:
            os.symlink(venv / "data.txt", venv / "a2x-local-bundle.txt")
    done = run_install(bundle, venv)
    assert done.returncode == 1, done.stderr
    assert ("no a2x-local bundle installed into it" in done.stderr or "a2x-local-bundle.txt" in done.stderr
            or "is a symbolic link" in done.stderr), done.stderr


def test_a_registry_path_that_is_a_pipe_is_refused_before_installing(tmp_path: Path):
    bundle = make_bundle(tmp_path / "bundle", "b-one", {"alpha": "1.0"})
    os.mkfifo(tmp_path / "registry.duckdb")
    done = run_install(bundle, tmp_path / "venv", "--registry", tmp_path / "registry.duckdb", timeout=180)
    assert done.returncode == 1 and "registry.duckdb" in done.stderr
    assert not (tmp_path / "venv").exists()


def test_sha256sums_written_by_the_bundle_passes_the_stricter_check(tmp_path: Path):
    """The real writer (`write_sums`) and the stricter reader agree: a bundle with nested folders installs."""
    bundle = make_bundle(tmp_path / "bundle", "b-one", {"alpha": "1.0"})
    (bundle / "models").mkdir()
    (bundle / "models" / "Qwen2.5-7B-Instruct.manifest.json").write_text("{}")
    write_sums(bundle)
    done = run_install(bundle, tmp_path / "venv")
    assert done.returncode == 0, done.stderr
