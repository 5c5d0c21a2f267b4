"""pip, run as a subprocess of the interpreter that runs a2x-local: resolving and downloading, building a wheel.

pip is the only tool that resolves and fetches exactly as an install would (its configuration, find-links and
indexes included), so the bundle uses it instead of reading indexes itself.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from a2x_local.errors import UserError


@dataclass(frozen=True)
class Resolved:
    """One distribution of a pip resolution: what it is and the exact file pip chose for it."""
    name: str
    version: str
    filename: str
    sha256: str


def run_pip(args: list[str], *, what: str, cwd: Path | None = None) -> str:
    """Run `python -m pip ARGS`; a failure is a UserError quoting the end of pip's output."""
    done = subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args], cwd=cwd,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = [line.strip() for line in (done.stderr + done.stdout).splitlines()
                 if line.strip() and not line.startswith("WARNING: Location")]
        # A resolution conflict: pip names the packages right after this line; say that, not its advice.
        cause = next((i for i, line in enumerate(lines) if line.startswith("The conflict is caused by")), None)
        shown = lines[cause:cause + 4] if cause is not None else lines[-6:]
        raise UserError(f"{what} failed (pip exited {done.returncode}): " + " | ".join(shown)[:1500],
                        hint="check the network or your pip configuration (`pip config list`); the pip command was:"
                        f" pip {' '.join(args)[:300]}")
    return done.stdout


def fetch_resolved(requirement: str, constraints: Path, dest: Path, pip_args: list[str]) -> None:
    """Resolve ``requirement`` under ``constraints`` for this interpreter and platform and save every wheel of the
    resolution in ``dest`` (`pip download`: one pass; pip checks each file against the index's hash)."""
    run_pip(["download", "--only-binary=:all:", "--quiet", "--dest", str(dest), "-c", str(constraints), *pip_args,
             requirement], what=f"resolving and downloading {requirement}")


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
