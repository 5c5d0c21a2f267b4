"""`models pack` / `models verify`: a model folder becomes one archive with a manifest, and every file is checked on
the far side, by the archive or by the folder unpacked from it; damage is named file by file."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from a2x_local.delivery import ModelToPack, pack_model, verify_model
from a2x_local.errors import UserError

MANIFEST = "a2x-model-manifest.json"


@pytest.fixture
def model_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "My-Model"
    (folder / "sub").mkdir(parents=True)
    (folder / "config.json").write_text('{"architectures": ["X"]}')
    (folder / "model.safetensors").write_bytes(bytes(range(256)) * 5000)
    (folder / "sub" / "tokenizer.json").write_text("{}")
    (folder / ".cache" / "huggingface").mkdir(parents=True)
    (folder / ".cache" / "huggingface" / "download.lock").write_text("hub bookkeeping")
    return folder


def packed(model_folder: Path, out: Path) -> Path:
    report = pack_model(ModelToPack(model_folder, "my-model", "my-alias", {"engine": {"dtype": "bfloat16"}}), out)
    return report.archive


def test_pack_writes_archive_and_manifest_with_every_file(model_folder: Path, tmp_path: Path):
    archive = packed(model_folder, tmp_path / "out")
    manifest = json.loads((tmp_path / "out" / "my-model.manifest.json").read_text())
    assert manifest["alias"] == "my-alias" and manifest["checked_with"] == {"engine": {"dtype": "bfloat16"}}
    assert {f["path"] for f in manifest["files"]} == {"config.json", "model.safetensors", "sub/tokenizer.json"}
    assert next(f for f in manifest["files"] if f["path"] == "model.safetensors")["bytes"] == 256 * 5000
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
    assert names == {"my-model/config.json", "my-model/model.safetensors", "my-model/sub/tokenizer.json",
                     f"my-model/{MANIFEST}"}
    report = verify_model(archive)
    assert report.ok and report.files == 3 and report.alias == "my-alias", report.problems


def test_verify_names_a_changed_file_in_the_archive(model_folder: Path, tmp_path: Path):
    archive = packed(model_folder, tmp_path / "out")
    data = bytearray(archive.read_bytes())
    with tarfile.open(archive) as tar:
        member = tar.getmember("my-model/model.safetensors")
    data[member.offset_data + 1000] ^= 0xFF  # one flipped byte inside the weights
    archive.write_bytes(bytes(data))
    report = verify_model(archive)
    assert not report.ok
    assert len(report.problems) == 1 and report.problems[0].startswith("model.safetensors: SHA-256"), report.problems


def test_verify_of_the_unpacked_folder_names_missing_truncated_and_added_files(model_folder: Path, tmp_path: Path):
    archive = packed(model_folder, tmp_path / "out")
    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path / "far", filter="data")
    unpacked = tmp_path / "far" / "my-model"
    assert verify_model(unpacked).ok
    (unpacked / "sub" / "tokenizer.json").unlink()
    weights = unpacked / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    (unpacked / "notes.txt").write_text("x")
    report = verify_model(unpacked)
    assert sorted(p.split(":")[0] for p in report.problems) == ["model.safetensors", "sub/tokenizer.json"]
    assert "truncated" in next(p for p in report.problems if p.startswith("model.safetensors"))
    assert report.warnings == ["notes.txt: not in the manifest (added after packing?)"]


def test_pack_refuses_to_overwrite_and_leaves_nothing_half_written(model_folder: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch):
    packed(model_folder, tmp_path / "out")
    with pytest.raises(UserError, match="already exists"):
        packed(model_folder, tmp_path / "out")

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tarfile.TarFile, "addfile", disk_full)
    with pytest.raises(UserError, match="No space left"):
        packed(model_folder, tmp_path / "other" / "deeper")
    assert not (tmp_path / "other").exists()        # the folders the pack made went with it (issue 32, M9)


def test_verify_refuses_what_is_no_packed_model(tmp_path: Path, model_folder: Path):
    with pytest.raises(UserError, match=f"no {MANIFEST}"):
        verify_model(model_folder)
    bogus = tmp_path / "bogus.tar"
    bogus.write_text("not a tar")
    with pytest.raises(UserError, match="neither a model archive"):
        verify_model(bogus)
