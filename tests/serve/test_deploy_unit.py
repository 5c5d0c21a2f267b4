"""The systemd unit of the server is hardened: a private umask, an address allow-list, no capabilities, a device
list, a system-call filter; `systemd-analyze security` rates it OK (where systemd-analyze is installed)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.serve.helpers import ROOT

UNIT = ROOT / "deploy" / "a2x-local-serve.service"


def settings() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in UNIT.read_text(encoding="utf-8").splitlines():
        if "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            found.setdefault(key.strip(), []).append(value.strip())
    return found


def test_the_unit_declares_the_hardening():
    unit = settings()
    assert unit["UMask"] == ["0077"] and unit["IPAddressDeny"] == ["any"] and unit["IPAddressAllow"] == ["localhost"]
    assert unit["CapabilityBoundingSet"] == [""] and unit["NoNewPrivileges"] == ["yes"]
    assert unit["DevicePolicy"] == ["closed"] and unit["SystemCallArchitectures"] == ["native"]
    assert "@system-service" in unit["SystemCallFilter"] and unit["ProtectSystem"] == ["strict"]
    assert "EnvironmentFile" in unit and not any("--token" in value for value in unit["ExecStart"])


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_analyze_rates_it_ok():
    done = subprocess.run(["systemd-analyze", "security", "--offline=true", str(UNIT)], capture_output=True,
                          text=True, timeout=60, check=False)
    level = re.search(r"Overall exposure level for \S+: ([0-9.]+) (\w+)", done.stdout)
    assert level is not None, done.stdout + done.stderr
    assert float(level.group(1)) <= 2.0 and level.group(2) == "OK", level.group(0)
