"""The seventh probe round's findings in the offline kit (install.sh's checks of the locks, `bundle --reuse`): each
test failed on the code before its fix. P05: line breaks only pip sees; P13: pins without their wheel; P16: an
earlier bundle that names files outside itself."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from a2x_local.delivery.checksums import write_sums
from tests.delivery.fake_bundles import make_bundle, make_wheel, run_install

# --- P05: pip splits a lock with str.splitlines(); install.sh's check split at b"\n" only ------------------------

# Every character str.splitlines() breaks a line at, but "\n" itself.
SEPARATORS = {"\\r": "\r", "\\x0b": "\x0b", "\\x0c": "\x0c", "\\x1c": "\x1c", "\\x1d": "\x1d", "\\x1e": "\x1e",
              "U+0085": "\x85", "U+2028": "\u2028", "U+2029": "\u2029"}


def _outside(tmp_path: Path) -> tuple[Path, str]:
    """A folder outside the bundle holding a wheel pip would take, and that wheel's hash."""
    outside = tmp_path / "outside"
    outside.mkdir()
    wheel = make_wheel(outside, "evilpkg", "6.6")
    return outside, hashlib.sha256(wheel.read_bytes()).hexdigest()


def _smuggled(bundle: Path, name: str, added: str) -> tuple[Path, int]:
    """``added`` appended to the bundle's lock ``name`` (SHA256SUMS written again); the file and the line it is."""
    lock = bundle / name
    text = lock.read_text(encoding="utf-8")
    lock.write_text(text + added, encoding="utf-8")
    write_sums(bundle)
    return lock, text.count("\n") + 1


def _refused_before_anything_is_made(done, lock: Path, number: int, venv: Path, said: str) -> None:
    assert done.returncode == 1, done.stderr
    assert f"{lock} line {number}: " in done.stderr and said in done.stderr, done.stderr
    assert "nothing was made" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert not venv.exists()


@pytest.mark.parametrize("lock_name", ["requirements.lock", "project.lock"])
@pytest.mark.parametrize("separator", SEPARATORS)
def test_a_line_break_only_pip_sees_cannot_smuggle_an_option(tmp_path: Path, lock_name: str, separator: str):
    """P05 (H01 bypassed). Before: a comment on a hashed pin holding U+2028 (U+2029, U+0085) then
    `--find-links /outside` passed the check (it split at "\\n" only) and pip installed evilpkg from outside the
    bundle; `-r FILE` read a file outside, `-c FIFO` hung with a half-made venv. Now refused naming the file, the
    line and the character, before any venv is made."""
    outside, digest = _outside(tmp_path)
    bundle = make_bundle(tmp_path / "bundle", "b-one", {"alpha": "1.0"})
    char = SEPARATORS[separator]
    lock, number = _smuggled(bundle, lock_name, f"evilpkg==6.6 --hash=sha256:{digest}  # note{char}--find-links "
                                                f"{outside}\n")
    done = run_install(bundle, tmp_path / "venv", timeout=60)
    _refused_before_anything_is_made(done, lock, number, tmp_path / "venv", f"U+{ord(char):04X}")


@pytest.mark.parametrize("lock_name", ["requirements.lock", "project.lock"])
@pytest.mark.parametrize("separator", ["U+0085", "U+2028", "U+2029", "\\x1e"])
@pytest.mark.parametrize("option", ["-r {outside}/no-such-file.txt", "-c {pipe}"])
def test_a_comment_only_line_cannot_smuggle_an_option(tmp_path: Path, lock_name: str, separator: str, option: str):
    """P05: a comment line skips the pin's pattern; the characters of a lock line are checked on it too."""
    outside, _ = _outside(tmp_path)
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    bundle = make_bundle(tmp_path / "bundle", "b-one", {"alpha": "1.0"})
    char = SEPARATORS[separator]
    smuggled = option.format(outside=outside, pipe=pipe)
    lock, number = _smuggled(bundle, lock_name, f"# a comment{char}{smuggled}\n")
    done = run_install(bundle, tmp_path / "venv", timeout=60)
    _refused_before_anything_is_made(done, lock, number, tmp_path / "venv", f"U+{ord(char):04X}")


@pytest.mark.parametrize("char", ["\u00e9", "\u202e", "\u00a0", "\ufeff"])
def test_a_lock_line_is_ascii_only(tmp_path: Path, char: str):
    """P05: nothing but printable ASCII (and a tab) is in a lock `a2x-local bundle` writes; anything else is
    refused, the character named."""
    bundle = make_bundle(tmp_path / "bundle", "b-one", {"alpha": "1.0"})
    lock, number = _smuggled(bundle, "requirements.lock", f"# a note{char}x\n")
    done = run_install(bundle, tmp_path / "venv", timeout=60)
    _refused_before_anything_is_made(done, lock, number, tmp_path / "venv", f"U+{ord(char):04X}")


def test_an_encoding_comment_cannot_make_pip_read_other_lines(tmp_path: Path):
    """P05: pip decodes a requirements file by a `coding:` comment in its first two lines; in UTF-7 `+ICg-` is
    U+2028, spelled in ASCII. A lock never declares an encoding: refused."""
    outside, digest = _outside(tmp_path)
    bundle = make_bundle(tmp_path / "bundle", "b-one", {"alpha": "1.0"})
    lock = bundle / "requirements.lock"
    lock.write_text(f"# -*- coding: utf-7 -*-\n{lock.read_text().splitlines()[1]}\n"
                    f"evilpkg==6.6 --hash=sha256:{digest}  # note+ICg---find-links {outside}\n")
    write_sums(bundle)
    done = run_install(bundle, tmp_path / "venv", timeout=60)
    _refused_before_anything_is_made(done, lock, 1, tmp_path / "venv", "declares an encoding")


# --- P13: every pin has its one wheel in wheels/, and project.lock pins a2x-local -------------------------------

def test_a_pin_whose_wheel_is_missing_is_named_before_anything_is_made(tmp_path: Path):
    """P13. Before: `ERROR: No matching distribution found for absentpkg==1.0` from pip, and a half-made venv
    (bin include lib lib64 pyvenv.cfg). Now install.sh names the lock, the line and the wheel; nothing is made."""
    _, digest = _outside(tmp_path)
    bundle = make_bundle(tmp_path / "bundle", "b-one", {"alpha": "1.0"})
    lock, number = _smuggled(bundle, "requirements.lock", f"absentpkg==1.0 --hash=sha256:{digest}\n")
    done = run_install(bundle, tmp_path / "venv", timeout=60)
    _refused_before_anything_is_made(done, lock, number, tmp_path / "venv",
                                     "pins absentpkg==1.0, but wheels/ holds no wheel of it (absentpkg-1.0-*.whl)")


def test_a_wheel_removed_from_the_bundle_is_named(tmp_path: Path):
    """P13: the wheel gone from wheels/ and from SHA256SUMS alike (the sums still verify)."""
    bundle = make_bundle(tmp_path / "bundle", "b-one", {"alpha": "1.0", "beta": "2.0"})
    (bundle / "wheels" / "beta-2.0-py3-none-any.whl").unlink()
    write_sums(bundle)
    done = run_install(bundle, tmp_path / "venv", timeout=60)
    _refused_before_anything_is_made(done, bundle / "requirements.lock", 3, tmp_path / "venv",
                                     "pins beta==2.0, but wheels/ holds no wheel of it")


def test_two_wheels_of_one_pin_are_refused(tmp_path: Path):
    """P13: exactly one wheel a pin: a second build of it (another tag) is a bundle `a2x-local bundle` never wrote."""
    bundle = make_bundle(tmp_path / "bundle", "b-one", {"alpha": "1.0"})
    wheel = bundle / "wheels" / "alpha-1.0-py3-none-any.whl"
    (bundle / "wheels" / "alpha-1.0-1-py3-none-any.whl").write_bytes(wheel.read_bytes())
    write_sums(bundle)
    done = run_install(bundle, tmp_path / "venv", timeout=60)
    _refused_before_anything_is_made(done, bundle / "requirements.lock", 2, tmp_path / "venv", "holds 2 wheels")


def test_a_project_lock_without_a2x_local_is_refused(tmp_path: Path):
    """P13. Before: pip installed what project.lock named, the marker was written, then
    `install.sh: line 432: .../bin/a2x-local: No such file or directory`, exit 127. Now refused; nothing made."""
    bundle = make_bundle(tmp_path / "bundle", "b-one", {"alpha": "1.0"})
    (bundle / "project.lock").write_text((bundle / "requirements.lock").read_text())
    write_sums(bundle)
    done = run_install(bundle, tmp_path / "venv", timeout=60)
    assert done.returncode == 1, done.stderr
    assert f"{bundle / 'project.lock'}: pins no a2x-local" in done.stderr, done.stderr
    assert "nothing was made" in done.stderr and not (tmp_path / "venv").exists()


def test_pins_match_wheels_by_their_normalised_names(tmp_path: Path):
    """P13: a pin spelled otherwise than its wheel's file name (case, `.`, `-`, `_`) is its wheel: it installs."""
    bundle = make_bundle(tmp_path / "bundle", "b-one", {"Zeta.Pkg": "1.0", "omega-two": "2.0rc1"})
    lock = bundle / "requirements.lock"
    lock.write_text(lock.read_text().replace("Zeta.Pkg==", "zeta_pkg==").replace("omega-two==", "Omega.Two=="))
    write_sums(bundle)
    done = run_install(bundle, tmp_path / "venv", timeout=120)
    assert done.returncode == 0, done.stderr
