"""pip, run as a subprocess of the interpreter that runs a2x-local: resolution reports, downloads, wheel builds.

pip is the only tool that resolves and fetches exactly as an install would (its configuration, find-links and
indexes included), so the bundle uses it instead of reading indexes itself.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from a2x_local.errors import UserError


@dataclass(frozen=True)
class Resolved:
    """One distribution of a pip resolution: what it is and the exact file pip chose for it."""
    name: str
    version: str
    filename: str
    url: str
    sha256: str | None


def run_pip(args: list[str], *, what: str, cwd: Path | None = None) -> str:
    """Run `python -m pip ARGS`; a failure is a UserError quoting the end of pip's output."""
    done = subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args], cwd=cwd,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = [line for line in (done.stderr + done.stdout).splitlines()
                 if line.strip() and not line.startswith("WARNING: Location")]
        raise UserError(f"{what} failed (pip exited {done.returncode}): " + " | ".join(lines[-6:])[:1500],
                        hint="check the network or your pip configuration (`pip config list`); the pip command was:"
                        f" pip {' '.join(args)[:300]}")
    return done.stdout


def resolve(requirement: str, constraints: Path, report: Path, pip_args: list[str]) -> list[Resolved]:
    """Resolve ``requirement`` under ``constraints`` for this interpreter and platform without installing anything
    (`pip install --dry-run --ignore-installed --report`)."""
    run_pip(["install", "--dry-run", "--ignore-installed", "--quiet", "--only-binary=:all:", "--report", str(report),
             "-c", str(constraints), *pip_args, requirement], what=f"resolving {requirement}")
    data: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))
    found = []
    for item in data.get("install", []):
        info, download = item["metadata"], item["download_info"]
        url = download["url"]
        hashes = download.get("archive_info", {}).get("hashes", {})
        found.append(Resolved(info["name"], info["version"], unquote(Path(urlparse(url).path).name), url,
                              hashes.get("sha256")))
    return found


def download(lock: Path, dest: Path, pip_args: list[str]) -> None:
    """Fetch the exact wheels of ``lock`` (`name==version --hash=sha256:...` lines), checked by pip against the
    hashes, without their dependencies (the lock is already the whole set)."""
    run_pip(["download", "--no-deps", "--only-binary=:all:", "--require-hashes", "--quiet", "--dest", str(dest),
             "-r", str(lock), *pip_args], what="downloading the wheelhouse")


def build_wheel(source: Path, dest: Path) -> Path:
    """Build the wheel of the project in ``source`` with this environment's setuptools (no build isolation: the
    builder needs no index for it)."""
    before = set(dest.glob("*.whl"))
    run_pip(["wheel", "--no-deps", "--no-build-isolation", "--quiet", "--wheel-dir", str(dest), str(source)],
            what=f"building the a2x-local wheel from {source}")
    built = sorted(set(dest.glob("*.whl")) - before)
    if len(built) != 1:
        raise UserError(f"building the a2x-local wheel from {source} gave {len(built)} wheels",
                        hint="build it by hand with `pip wheel --no-deps .` to see why")
    return built[0]
