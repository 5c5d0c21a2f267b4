"""Helpers of the slow offline-delivery tests: a CPU bundle built once and reused, commands run inside a network
namespace with only loopback (`unshare -n`, root), and a guard that logs every attempt to reach another host.

The dependency wheels (~0.9 GB) are fetched once into a cache folder keyed by constraints.txt and the extras of
pyproject.toml ($A2X_TEST_BUNDLE_CACHE, default ~/.cache/a2x-local/test-bundles; older keys are removed), because
resolving and downloading them takes minutes; every session then builds its bundle with `a2x-local bundle --reuse`
(a2x-local's own wheel from this tree). A2X_TEST_BUNDLE_FRESH=1 builds the full bundle from nothing.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from tests.support.paths import ROOT

BUNDLE_CLI = [str(Path(sys.executable).parent / "a2x-local")]

# Imported first by every Python process of an offline run (via PYTHONPATH): an audit hook logs each lookup of, or
# connection to, an address that is not this machine's loopback or a local socket file.
GUARD = r'''
import os, sys

_LOG = os.environ.get("A2X_NETWORK_LOG")
_LOCAL = ("127.", "::1", "localhost", "0.0.0.0")

def _is_local(host):
    return host is None or host == "" or (isinstance(host, str) and host.startswith(_LOCAL))

def _hook(event, args):
    if not _LOG:
        return
    if event in ("socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyname_ex"):
        host = args[0]
    elif event in ("socket.connect", "socket.sendto", "socket.sendmsg"):
        address = args[1] if len(args) > 1 else None
        host = address[0] if isinstance(address, tuple) else None  # str/bytes: a local (unix) socket
    else:
        return
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    if not _is_local(host):
        with open(_LOG, "a", encoding="utf-8") as log:
            log.write(f"{event} {host!r} pid {os.getpid()} argv {sys.argv[:3]}\n")

sys.addaudithook(_hook)
'''


def cache_root() -> Path:
    return Path(os.environ.get("A2X_TEST_BUNDLE_CACHE") or Path.home() / ".cache" / "a2x-local" / "test-bundles")


def wheel_key() -> str:
    """What decides the dependency wheels: the pins and the project's declared dependencies."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = json.dumps([project["dependencies"], project["optional-dependencies"]], sort_keys=True)
    return hashlib.sha256((ROOT / "constraints.txt").read_bytes() + declared.encode()).hexdigest()[:16]


def run_bundle(*args: str, timeout: int = 3600) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([*BUNDLE_CLI, "bundle", *args, "--json"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, f"a2x-local bundle {' '.join(args)} failed:\n{done.stderr[-3000:]}"
    return json.loads(done.stdout)


def dependency_bundle() -> Path:
    """The cached full CPU bundle whose dependency wheels every session reuses (built when missing or stale)."""
    root = cache_root()
    cached = root / f"cpu-{wheel_key()}"
    if os.environ.get("A2X_TEST_BUNDLE_FRESH") == "1":
        shutil.rmtree(cached, ignore_errors=True)
    root.mkdir(parents=True, exist_ok=True)
    # Test workers run in parallel: the first builds, the others wait on this lock and then reuse its bundle.
    with open(root / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (cached / "SHA256SUMS").is_file():
            shutil.rmtree(cached, ignore_errors=True)
            started = time.monotonic()
            report = run_bundle("--target", "cpu", "--out", str(cached))
            print(f"\nfull CPU bundle built in {time.monotonic() - started:.0f} s: {report['seconds']}, "
                  f"{report['total_bytes'] / 2**20:.0f} MiB", file=sys.stderr)
        for stale in root.glob("cpu-*"):
            if stale != cached:
                shutil.rmtree(stale, ignore_errors=True)
    return cached


def network_namespace_or_skip() -> None:
    try:
        done = subprocess.run(["unshare", "--net", "true"], capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        pytest.skip("no `unshare` here (util-linux): cannot run commands without network")
    if done.returncode != 0:
        pytest.skip(f"cannot make a network namespace here (`unshare --net` needs root or CAP_SYS_ADMIN): "
                    f"{done.stderr.strip()[:200]}")


class Offline:
    """Runs commands inside a fresh network namespace (loopback only, brought up), with the guard loaded into every
    Python process and a clean environment (no PIP_* variables, no PYTHONPATH to this tree, its own home)."""

    def __init__(self, work: Path) -> None:
        guard = work / "guard"
        guard.mkdir(parents=True, exist_ok=True)
        (guard / "sitecustomize.py").write_text(GUARD, encoding="utf-8")
        self.log = work / "network-attempts.log"
        self.work = work
        home = work / "home"
        home.mkdir(exist_ok=True)
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "A2X_HOME": str(home / "a2x"),
                    "PYTHONPATH": str(guard), "A2X_NETWORK_LOG": str(self.log), "LANG": "C.UTF-8",
                    "VLLM_CPU_OMP_THREADS_BIND": "nobind"}

    def run(self, *command: str | Path, timeout: int = 1200, check: bool = True) -> subprocess.CompletedProcess[str]:
        script = 'ip link set lo up 2>/dev/null; exec "$@"'
        done = subprocess.run(["unshare", "--net", "sh", "-c", script, "offline", *map(str, command)],
                              cwd=self.work, env=self.env, capture_output=True, text=True, timeout=timeout)
        if check:
            assert done.returncode == 0, (f"{' '.join(map(str, command))} exited {done.returncode}:\n"
                                          f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
        return done

    def json(self, *command: str | Path, timeout: int = 1200) -> object:
        return json.loads(self.run(*command, "--json", timeout=timeout).stdout)

    def attempts(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []
