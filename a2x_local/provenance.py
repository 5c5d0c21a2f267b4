"""Where the running a2x-local came from: its version, the commit it was built from and the offline bundle that
carried it, so `--version`, `stats` and the registry's software history can say which install did what.

A wheel built by `a2x-local bundle` carries `build_info.json` beside this module (written into a copy of the source
before the wheel is built, never into a checkout); a source tree or a plain `pip install .` has none and says so.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from a2x_local import __version__
from a2x_local.jsonfiles import read_json

BUILD_INFO = "build_info.json"


@dataclass(frozen=True)
class Provenance:
    version: str
    commit: str | None = None       # full commit id of the source the wheel was built from, when known
    dirty: bool = False             # the source had changes not committed
    bundle_id: str | None = None    # the offline bundle the wheel was built for
    target: str | None = None       # cpu | gpu
    built_at: str | None = None     # UTC, ISO 8601

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        """One line for people: `a2x-local 0.1.0 (commit 1234567890, bundle ...)`."""
        if self.commit is None and self.bundle_id is None:
            return f"a2x-local {self.version} (source tree, not from a bundle)"
        commit = f"commit {self.commit[:10]}{'+changes' if self.dirty else ''}" if self.commit else "commit unknown"
        bundle = f", bundle {self.bundle_id}" if self.bundle_id else ""
        return f"a2x-local {self.version} ({commit}{bundle})"


@cache
def current() -> Provenance:
    """The provenance of the running package (read once per process)."""
    info = resources.files("a2x_local").joinpath(BUILD_INFO)
    if not info.is_file():
        return Provenance(__version__)
    data = read_json(Path(str(info)))
    return Provenance(version=__version__, commit=data.get("commit"), dirty=bool(data.get("dirty")),
                      bundle_id=data.get("bundle_id"), target=data.get("target"), built_at=data.get("built_at"))
