"""Small bundles of real wheels for install.sh's fast tests: a few packages of a few hundred bytes and a stand-in for
a2x-local whose `a2x-local --version` prints the bundle id, laid out as `a2x-local bundle` lays out a bundle
(wheels/, requirements.lock, project.lock, BUNDLE_ID, PLATFORM, SHA256SUMS, install.sh). pip installs them for real
into real virtual environments, in seconds and with no network."""

from __future__ import annotations

import base64
import hashlib
import platform
import subprocess
import sys
import tempfile
import zipfile
from importlib import resources
from pathlib import Path

from a2x_local.delivery.checksums import write_sums

PLATFORM = f"cp{sys.version_info[0]}{sys.version_info[1]}-{sys.platform}-{platform.machine()}"
INSTALLED = ("import importlib.metadata as m, json; "
             "print(json.dumps(sorted(d.metadata['Name'].lower() for d in m.distributions())))")


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def make_wheel(folder: Path, name: str, version: str, files: dict[str, str] | None = None,
               entry_points: str = "") -> Path:
    """A pure-Python wheel of ``name`` holding ``files`` (path -> text), with a correct RECORD."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    contents = {path: text.encode() for path, text in (files or {f"{dist}_mod.py": "VALUE = 1\n"}).items()}
    contents[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
    contents[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    if entry_points:
        contents[f"{info}/entry_points.txt"] = entry_points.encode()
    record = [_record_line(path, data) for path, data in contents.items()] + [f"{info}/RECORD,,"]
    contents[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    path = folder / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for member, data in contents.items():
            wheel.writestr(member, data)
    return path


def _lock_line(name: str, version: str, wheel: Path) -> str:
    return f"{name}=={version} --hash=sha256:{hashlib.sha256(wheel.read_bytes()).hexdigest()}\n"


def make_bundle(folder: Path, bundle_id: str, packages: dict[str, str]) -> Path:
    """A bundle of ``packages`` (name -> version) and the a2x-local stand-in, with install.sh from this tree."""
    wheels = folder / "wheels"
    wheels.mkdir(parents=True)
    lock = f"# {bundle_id}: test packages\n"
    for name, version in packages.items():
        lock += _lock_line(name, version, make_wheel(wheels, name, version))
    cli = f"def main():\n    print('a2x-local 0.0.1 (bundle {bundle_id})')\n"
    project = make_wheel(wheels, "a2x-local", "0.0.1", {"a2x_local_standin.py": cli},
                         "[console_scripts]\na2x-local = a2x_local_standin:main\n")
    (folder / "requirements.lock").write_text(lock)
    (folder / "project.lock").write_text(_lock_line("a2x-local", "0.0.1", project))
    (folder / "BUNDLE_ID").write_text(bundle_id + "\n")
    (folder / "PLATFORM").write_text(PLATFORM + "\n")
    install = folder / "install.sh"
    install.write_text(resources.files("a2x_local.delivery").joinpath("install.sh").read_text())
    install.chmod(0o755)
    write_sums(folder)
    return folder


def run_install(bundle: Path, *args: object, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`bundle/install.sh ARGS` with this interpreter as the environment's Python."""
    env = {"PATH": "/usr/bin:/bin", "A2X_PYTHON": sys.executable, "HOME": str(bundle.parent),
           "TMPDIR": tempfile.gettempdir()}          # the session's scratch folder: pip's own files go there too
    return subprocess.run(["bash", str(bundle / "install.sh"), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env)


def installed(venv: Path) -> set[str]:
    """The distributions installed in a virtual environment (lower-case names)."""
    import json

    done = subprocess.run([str(venv / "bin" / "python"), "-c", INSTALLED], capture_output=True, text=True, check=True)
    return set(json.loads(done.stdout))
