"""install.sh on small bundles of real wheels (issue 32, findings 1 and 10): it installs into a new or empty folder or
over an earlier bundle's install only (its marker), refuses any other folder unless --force, never removes a
package it did not install, and lists nothing in SHA256SUMS by a part of a line."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from a2x_local.delivery.checksums import write_sums
from tests.delivery.fake_bundles import installed, make_bundle, make_wheel, run_install
from tests.support.processes import tree_env

MARKER = "a2x-local-bundle.txt"


def pip_install(venv: Path, wheel: Path) -> None:
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
                    str(wheel)], check=True, capture_output=True,
                   env={"PATH": "/usr/bin:/bin", "TMPDIR": tempfile.gettempdir()})


def foreign_venv(where: Path, tmp_path: Path) -> Path:
    """A virtual environment nobody installed a bundle into, holding a package of its own (gamma)."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, env=tree_env())
    pip_install(where, make_wheel(tmp_path, "gamma", "3.0"))
    return where


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize("kind", ["environment", "folder"])
def test_a_folder_no_bundle_made_is_refused_and_left_as_it_was(tmp_path: Path, kind: str):
    bundle = make_bundle(tmp_path / "bundle", "b-one", {"alpha": "1.0"})
    if kind == "environment":
        venv = foreign_venv(tmp_path / "venv", tmp_path)
    else:
        venv = tmp_path / "venv"
        (venv / "notes").mkdir(parents=True)
        (venv / "notes" / "todo.txt").write_text("mine")
    before = listing(venv)
    done = run_install(bundle, venv)
    assert done.returncode == 1, done.stderr
    assert "is not empty and no a2x-local bundle installed into it" in done.stderr and "--force" in done.stderr
    if kind == "environment":
        assert "Python environment with" in done.stderr and "pyvenv.cfg" in done.stderr, done.stderr
    else:
        assert "notes" in done.stderr
    assert listing(venv) == before


def test_force_installs_into_it_and_removes_nothing_it_did_not_install(tmp_path: Path):
    bundle = make_bundle(tmp_path / "bundle", "b-one", {"alpha": "1.0"})
    venv = foreign_venv(tmp_path / "venv", tmp_path)
    had = installed(venv)
    done = run_install(bundle, venv, "--force")
    assert done.returncode == 0, done.stderr
    assert installed(venv) == had | {"alpha", "a2x-local"}
    assert "nothing already in it is removed" in done.stderr and "removing" not in done.stderr
    marker = (venv / MARKER).read_text()
    assert "bundle b-one" in marker and "package alpha==1.0" in marker and "gamma" not in marker


def test_an_upgrade_removes_only_what_the_earlier_bundle_installed(tmp_path: Path):
    venv = tmp_path / "venv"
    first = make_bundle(tmp_path / "one", "b-one", {"alpha": "1.0", "beta": "1.0"})
    done = run_install(first, venv)
    assert done.returncode == 0, done.stderr
    assert "b-one" in subprocess.run([str(venv / "bin" / "a2x-local"), "--version"], capture_output=True,
                                     text=True).stdout
    pip_install(venv, make_wheel(tmp_path, "gamma", "3.0"))      # the operator's own addition
    had = installed(venv)
    assert {"alpha", "beta", "gamma", "a2x-local"} <= had

    second = make_bundle(tmp_path / "two", "b-two", {"alpha": "2.0"})
    done = run_install(second, venv)
    assert done.returncode == 0, done.stderr
    assert installed(venv) == had - {"beta"}
    assert "removing what the earlier bundle installed and this one does not carry: beta" in done.stderr
    assert "bundle b-two" in (venv / MARKER).read_text()



@pytest.mark.parametrize("had_version", ["1.0", "0.9"])
def test_force_then_upgrade_never_removes_a_package_the_operator_had(tmp_path: Path, had_version: str):
    """The operator's alpha (the bundle's version or another) was there before --force: the marker does not list it
    as the bundle's, so an upgrade by a bundle without alpha keeps it (it ran `pip uninstall alpha` before)."""
    venv = foreign_venv(tmp_path / "venv", tmp_path)
    pip_install(venv, make_wheel(tmp_path, "alpha", had_version))
    done = run_install(make_bundle(tmp_path / "one", "b-one", {"alpha": "1.0", "beta": "1.0"}), venv, "--force")
    assert done.returncode == 0, done.stderr
    marker = (venv / MARKER).read_text()
    assert "package beta==1.0" in marker and "alpha" not in marker and "gamma" not in marker, marker
    had = installed(venv)

    done = run_install(make_bundle(tmp_path / "two", "b-two", {"delta": "1.0"}), venv)
    assert done.returncode == 0, done.stderr
    assert installed(venv) == (had - {"beta"}) | {"delta"}, done.stderr
    assert "removing what the earlier bundle installed and this one does not carry: beta\n" in done.stderr
    marker = (venv / MARKER).read_text()
    assert "package delta==1.0" in marker and "alpha" not in marker and "beta" not in marker, marker


def test_a_package_the_operator_added_stays_theirs_when_a_later_bundle_carries_it(tmp_path: Path):
    """gamma added by hand after the first bundle, then carried by the second at the same version: still not the
    bundle's, so the third (without gamma) keeps it; what the bundles installed themselves stays theirs."""
    venv = tmp_path / "venv"
    assert run_install(make_bundle(tmp_path / "one", "b-one", {"alpha": "1.0"}), venv).returncode == 0
    pip_install(venv, make_wheel(tmp_path, "gamma", "3.0"))
    done = run_install(make_bundle(tmp_path / "two", "b-two", {"alpha": "1.0", "gamma": "3.0"}), venv)
    assert done.returncode == 0, done.stderr
    marker = (venv / MARKER).read_text()
    assert "package alpha==1.0" in marker and "gamma" not in marker, marker
    done = run_install(make_bundle(tmp_path / "three", "b-three", {"beta": "1.0"}), venv)
    assert done.returncode == 0, done.stderr
    assert "gamma" in installed(venv) and "alpha" not in installed(venv), done.stderr
    assert "does not carry: alpha\n" in done.stderr

def test_an_empty_folder_is_installed_into(tmp_path: Path):
    bundle = make_bundle(tmp_path / "bundle", "b-one", {"alpha": "1.0"})
    (tmp_path / "venv").mkdir()
    done = run_install(bundle, tmp_path / "venv")
    assert done.returncode == 0, done.stderr
    assert "alpha" in installed(tmp_path / "venv")


def test_a_marker_whose_packages_changed_since_removes_none_of_those(tmp_path: Path):
    """Issue 32, fourth round: a package the marker lists but that is no longer at the version it lists (beta
    upgraded by hand, pip itself) is someone else's now: the upgrade keeps it and says so."""
    venv = tmp_path / "venv"
    assert run_install(make_bundle(tmp_path / "one", "b-one", {"alpha": "1.0", "beta": "1.0"}), venv).returncode == 0
    pip_install(venv, make_wheel(tmp_path, "beta", "2.0"))
    with (venv / MARKER).open("a") as marker:
        marker.write("package pip==1\n")
    done = run_install(make_bundle(tmp_path / "two", "b-two", {"alpha": "1.0"}), venv)
    assert done.returncode == 0, done.stderr
    assert {"beta", "pip", "alpha"} <= installed(venv), done.stderr
    assert "keeping beta 2.0: the earlier bundle installed 1.0" in done.stderr


# --- issue 32, fourth round: a marker proves itself before anything changes -----------------------------------------

HEADER = ("# Written by a2x-local's install.sh: the bundle installed here and the packages it installed. An upgrade\n"
          "# removes only packages listed here that the newer bundle does not carry. Do not edit.\n")
BAD_MARKERS = {
    "empty": (b"", "empty"),
    "forged, packages only": (b"package foreignpkg==2.0\npackage setuptools==65.5.0\n", "line 1"),
    "no bundle line": (HEADER.encode() + b"package alpha==1.0\n", "line 3"),
    "a bundle line that is a path": (HEADER.encode() + b"bundle ../x\n", "line 3"),
    "an option for pip": (HEADER.encode() + b"bundle b-one\npackage --yes\n", "line 4"),
    "a name twice": (HEADER.encode() + b"bundle b-one\npackage alpha==1.0\npackage Alpha==1.0\n", "line 5"),
    "cut short": (HEADER.encode() + b"bundle b-one\npackage alpha==1.0", "line break"),
    "not UTF-8": (HEADER.encode() + b"bundle b-one\npackage \xff\xfe==1\n", "not UTF-8"),
    "a carriage return": (HEADER.encode() + b"bundle b-one\r\n", "line 3"),
}


@pytest.mark.parametrize("shape", [*BAD_MARKERS, "1 GiB (sparse)"])
def test_a_marker_install_sh_did_not_write_is_refused_before_anything_changes(tmp_path: Path, shape: str):
    """Before: any file of that name made the folder a bundle's install (an empty one; a forged one got foreignpkg
    and setuptools uninstalled); bytes that are not UTF-8 were a traceback after pip had replaced packages; 1 GiB
    was read whole, twice. Now each is refused, naming the marker and the line, and the folder is left as it was."""
    bundle = make_bundle(tmp_path / "bundle", "b-one", {"alpha": "1.0"})
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / "notes.txt").write_text("mine")
    if shape in BAD_MARKERS:
        data, said = BAD_MARKERS[shape]
        (venv / MARKER).write_bytes(data)
    else:
        (venv / MARKER).write_text(HEADER + "bundle b-zero\n")
        os.truncate(venv / MARKER, 1 << 30)
        said = "holds 1073741824 bytes"
    before = listing(venv)
    done = run_install(bundle, venv, "--force")
    assert done.returncode == 1, done.stderr
    assert f"{venv / MARKER}" in done.stderr and said in done.stderr, done.stderr
    assert "is not a marker install.sh wrote" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert listing(venv) == before


# --- issue 32, fourth round: the bundle is checked whole, links on the way included, before anything is made -------

def outside_wheels(bundle: Path, outside: Path) -> None:
    """Move the bundle's wheels/ out of it and leave a link in its place, with an unlisted wheel out there."""
    (bundle / "wheels").rename(outside)
    (outside / "evil-1.0-py3-none-any.whl").write_bytes(b"unlisted")
    os.symlink(outside, bundle / "wheels")


def listed_through_a_link(bundle: Path, outside: Path) -> None:
    """A listed `lib/f` whose folder `lib` is a link to a folder outside the bundle (its true hash listed)."""
    outside.mkdir()
    (outside / "f").write_bytes(b"data")
    os.symlink(outside, bundle / "lib")
    with (bundle / "SHA256SUMS").open("a") as sums:
        sums.write(f"{hashlib.sha256(b'data').hexdigest()}  lib/f\n")


def no_wheels(bundle: Path, outside: Path) -> None:
    for wheel in (bundle / "wheels").iterdir():
        wheel.unlink()
    (bundle / "wheels").rmdir()
    write_sums(bundle)


def sums_edit(text: str | None = None, append: bytes = b"", drop: str = "") -> object:
    def edit(bundle: Path, outside: Path) -> None:
        sums = bundle / "SHA256SUMS"
        lines = [line for line in sums.read_bytes().splitlines(keepends=True)
                 if not drop or not line.endswith(f"  {drop}\n".encode())]
        sums.write_bytes(text.encode() if text is not None else b"".join(lines) + append)
    return edit


BAD_BUNDLES = {
    "wheels/ a link out of the bundle": (outside_wheels, "wheels is missing or not a folder"),
    "a listed file through a folder link": (listed_through_a_link, "lib (on the way to lib/f"),
    "no wheels/": (no_wheels, "wheels is missing or not a folder"),
    "an empty SHA256SUMS": (sums_edit(text=""), "SHA256SUMS is empty"),
    "a NUL in a line": (sums_edit(append=b"aaaa\0bbbb\n"), "SHA256SUMS line"),
    "a line ending in a carriage return": (sums_edit(append=b"0" * 64 + b"  x\r\n"), "SHA256SUMS line"),
    "a path ending in /": (sums_edit(append=b"0" * 64 + b"  wheels/\n"), "SHA256SUMS line"),
    "a path listed twice": (sums_edit(append=b"0" * 64 + b"  PLATFORM\n"), "lists PLATFORM more than once"),
    "BUNDLE_ID unlisted": (sums_edit(drop="BUNDLE_ID"), "does not list BUNDLE_ID"),
}


@pytest.mark.parametrize("shape", BAD_BUNDLES)
def test_a_bundle_that_is_not_whole_is_refused_before_the_venv_is_made(tmp_path: Path, shape: str):
    """Before: wheels/ a link installed what lay outside, an unlisted wheel there included; `lib -> /outside` passed
    since only a path's last part was tested; no wheels/ was a raw find error and the venv was made anyway; an
    empty SHA256SUMS named no file; a NUL passed the line check. Now each is refused naming the file in the bundle."""
    bundle = make_bundle(tmp_path / "bundle", "b-one", {"alpha": "1.0"})
    change, said = BAD_BUNDLES[shape]
    change(bundle, tmp_path / "outside")
    done = run_install(bundle, tmp_path / "venv")
    assert done.returncode == 1, done.stderr
    assert said in done.stderr and f"{bundle}/" in done.stderr, done.stderr
    assert "find:" not in done.stderr and "warning" not in done.stderr and not (tmp_path / "venv").exists()


@pytest.mark.parametrize("slash", ["", "/"])
def test_a_venv_that_is_a_link_is_refused(tmp_path: Path, slash: str):
    """Before: a link to an empty folder ended in venv's own error. Now refused naming the link, nothing made."""
    bundle = make_bundle(tmp_path / "bundle", "b-one", {"alpha": "1.0"})
    (tmp_path / "empty").mkdir()
    os.symlink(tmp_path / "empty", tmp_path / "venv")
    done = run_install(bundle, f"{tmp_path / 'venv'}{slash}")
    assert done.returncode == 1, done.stderr
    assert f"{tmp_path / 'venv'} is a symbolic link" in done.stderr and "Error:" not in done.stderr, done.stderr
    assert not list((tmp_path / "empty").iterdir())


# --- finding 10: SHA256SUMS is matched by whole lines ---------------------------------------------------------------

def smuggle(bundle: Path, rel: str, data: bytes = b"smuggled") -> None:
    path = bundle / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


@pytest.mark.parametrize("unlisted", ["wheels/evil.whl", "wheels/.evil.whl", "wheels/sub/evil.whl"])
def test_an_unlisted_wheel_is_refused_even_when_a_longer_name_is_listed(tmp_path: Path, unlisted: str):
    bundle = make_bundle(tmp_path / "bundle", "b-one", {"alpha": "1.0"})
    smuggle(bundle, "wheels/evil.whl.txt", b"listed")
    write_sums(bundle)                     # lists wheels/evil.whl.txt ...
    smuggle(bundle, unlisted)              # ... and not this one
    done = run_install(bundle, tmp_path / "venv")
    assert done.returncode == 1, done.stderr
    named = unlisted.rsplit("/", 1)[0] if unlisted.count("/") > 1 else unlisted   # a sub-folder is named itself
    assert named in done.stderr and ("not listed in SHA256SUMS" in done.stderr or "no plain file name"
                                     in done.stderr or "not a regular file" in done.stderr), done.stderr
    assert not (tmp_path / "venv").exists()


@pytest.mark.parametrize("line", ["{hostname}  /etc/hostname", "{outside}  ../outside", "{inner}  wheels/../x",
                                  "{inner} *x", "garbage"])
def test_sha256sums_naming_paths_outside_the_bundle_is_refused(tmp_path: Path, line: str):
    """Each listed path is checked by sha256sum (a listed `/dev/zero` would be read forever): only plain paths
    inside the bundle are taken, each with its true hash here, so only the path can be what is refused."""
    bundle = make_bundle(tmp_path / "bundle", "b-one", {"alpha": "1.0"})
    (tmp_path / "outside").write_bytes(b"outside")
    (bundle / "x").write_bytes(b"inner")
    write_sums(bundle)
    digests = {name: hashlib.sha256(data).hexdigest() for name, data in
               (("hostname", Path("/etc/hostname").read_bytes()), ("outside", b"outside"), ("inner", b"inner"))}
    with (bundle / "SHA256SUMS").open("a") as sums:
        sums.write(line.format(**digests) + "\n")
    done = run_install(bundle, tmp_path / "venv")
    assert done.returncode == 1 and "SHA256SUMS line" in done.stderr, done.stderr
    assert not (tmp_path / "venv").exists()


def test_special_files_in_the_bundle_are_refused_before_anything_reads_them(tmp_path: Path):
    bundle = make_bundle(tmp_path / "bundle", "b-one", {"alpha": "1.0"})
    (bundle / "BUNDLE_ID").unlink()
    os.mkfifo(bundle / "BUNDLE_ID")        # read first by the old script: it blocked there forever
    try:
        done = run_install(bundle, tmp_path / "venv", timeout=180)
    except subprocess.TimeoutExpired:
        pytest.fail("install.sh blocked on a named pipe in the bundle")
    assert done.returncode == 1 and "BUNDLE_ID" in done.stderr and "not a regular file" in done.stderr


def test_a_bundle_id_that_is_a_path_is_refused(tmp_path: Path):
    bundle = make_bundle(tmp_path / "bundle", "b-one", {"alpha": "1.0"})
    (bundle / "BUNDLE_ID").write_text("../../etc/x\n")
    write_sums(bundle)
    registry = tmp_path / "registry.duckdb"
    registry.write_bytes(b"")
    done = run_install(bundle, tmp_path / "venv", "--registry", registry)
    assert done.returncode == 1 and "BUNDLE_ID" in done.stderr, done.stderr


def test_a_copy_of_the_registry_from_an_earlier_attempt_is_never_overwritten(tmp_path: Path):
    bundle = make_bundle(tmp_path / "bundle", "b-one", {"alpha": "1.0"})
    registry = tmp_path / "registry.duckdb"
    registry.write_bytes(b"the registry now")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(b"someone else's file")
    os.symlink(elsewhere, tmp_path / "registry.duckdb.before-b-one")
    done = run_install(bundle, tmp_path / "venv", "--registry", registry)
    assert done.returncode == 1 and "already exists" in done.stderr, done.stderr
    assert elsewhere.read_bytes() == b"someone else's file"
    assert not (tmp_path / "venv").exists()


# --- issue 33, F07-F09: paths from the operator's folder, checked (the registry's too) before anything changes ----

def run_install_from(cwd: Path, bundle: Path, *args: object) -> subprocess.CompletedProcess[str]:
    """`bundle/install.sh ARGS` run from ``cwd`` (run_install's environment)."""
    env = {"PATH": "/usr/bin:/bin", "A2X_PYTHON": sys.executable, "HOME": str(bundle.parent),
           "TMPDIR": tempfile.gettempdir()}          # the session's scratch folder: pip's own files go there too
    return subprocess.run(["bash", str(bundle / "install.sh"), *map(str, args)], capture_output=True, text=True,
                          timeout=300, env=env, cwd=cwd)


def test_relative_paths_are_taken_from_the_folder_it_is_run_from(tmp_path: Path):
    """F07. Before: install.sh went to its own folder first, so `install.sh myvenv` made bundle/myvenv (and said done
    "in myvenv"), and `--registry reg.duckdb` beside the operator was "no such registry". Now both are the
    operator's, and the messages show where they are."""
    bundle = make_bundle(tmp_path / "bundle", "b-one", {"alpha": "1.0"})
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "reg.duckdb").write_bytes(b"the registry")
    done = run_install_from(cwd, bundle, "myvenv", "--registry", "reg.duckdb")
    assert done.returncode == 0, done.stderr
    assert "alpha" in installed(cwd / "myvenv") and not (bundle / "myvenv").exists()
    assert f"VENV myvenv is {cwd}/myvenv" in done.stderr and f"done: b-one in {cwd}/myvenv" in done.stderr
    assert (cwd / "reg.duckdb.before-b-one").read_bytes() == b"the registry"
    assert f"copied {cwd}/reg.duckdb to {cwd}/reg.duckdb.before-b-one" in done.stderr, done.stderr


@pytest.mark.parametrize("given", ["", "v\nx", "v\tx", "v\x1b[31mx", "--registry="])
def test_an_empty_venv_or_one_with_control_characters_is_refused_before_anything_is_made(tmp_path: Path,
                                                                                        given: str):
    """F08. Before: `install.sh ""` (an unset "$VENV") made a virtualenv among the bundle's files and then ran
    /bin/python, the system's interpreter (pip install into it where it exists); a VENV with a line break was
    installed into. Now each is refused naming it, and nothing is made anywhere."""
    bundle = make_bundle(tmp_path / "bundle", "b-one", {"alpha": "1.0"})
    before, around = listing(bundle), sorted(os.listdir(tmp_path))
    if given == "--registry=":            # an empty --registry: refused the same way
        args: tuple[object, ...] = (tmp_path / "venv", "--registry", "")
        said = "--registry is empty"
    else:
        args = (given if not given else tmp_path / given,)
        said = "VENV is empty" if not given else "holds a control character"
    done = run_install_from(tmp_path, bundle, *args)
    assert done.returncode == 1, done.stderr
    assert said in done.stderr and "nothing was made" in done.stderr, done.stderr
    assert "checking the bundle" not in done.stderr and "creating" not in done.stderr, done.stderr
    assert listing(bundle) == before and sorted(os.listdir(tmp_path)) == around


def long_backup_name(folder: Path) -> Path:
    registry = folder / ("r" * 240 + ".duckdb")      # + ".before-b-one": 260 bytes, past NAME_MAX (255)
    registry.write_bytes(b"db")
    return registry


def wal_a_pipe(folder: Path) -> Path:
    (folder / "fw.duckdb").write_bytes(b"db")
    os.mkfifo(folder / "fw.duckdb.wal")
    return folder / "fw.duckdb"


def wal_a_link(folder: Path) -> Path:
    (folder / "wl.duckdb").write_bytes(b"db")
    (folder / "other").write_bytes(b"someone else's")
    os.symlink(folder / "other", folder / "wl.duckdb.wal")
    return folder / "wl.duckdb"


def link_out_of_its_folder(folder: Path) -> Path:
    (folder / "data").mkdir()
    (folder / "data" / "real.duckdb").write_bytes(b"db")
    os.symlink(folder / "data" / "real.duckdb", folder / "link.duckdb")
    return folder / "link.duckdb"


def link_to_nowhere(folder: Path) -> Path:
    os.symlink(folder / "gone.duckdb", folder / "dangling.duckdb")
    return folder / "dangling.duckdb"


def a_folder(folder: Path) -> Path:
    (folder / "dir.duckdb").mkdir()
    return folder / "dir.duckdb"


BAD_REGISTRIES = {
    "a backup name too long": (long_backup_name, "would have a name of 260 bytes, more than the 255"),
    "a .wal that is a named pipe": (wal_a_pipe, "fw.duckdb.wal, the registry's write-ahead log, is a named pipe"),
    "a .wal that is a link": (wal_a_link, "wl.duckdb.wal, the registry's write-ahead log, is a symbolic link"),
    "a link out of its folder": (link_out_of_its_folder, "link.duckdb is a symbolic link to"),
    "a link to nowhere": (link_to_nowhere, "dangling.duckdb is a symbolic link to nowhere"),
    "a folder": (a_folder, "dir.duckdb is a folder, not a regular file"),
}


@pytest.mark.parametrize("shape", BAD_REGISTRIES)
def test_a_registry_that_cannot_be_copied_or_opened_is_refused_before_anything_changes(tmp_path: Path, shape: str):
    """F09. Before: only `-f DB` was checked up front; a backup name past NAME_MAX (a raw `cp: cannot stat`), a .wal
    that is a named pipe (the copy made without it, then a2x-local refused the pipe), a link out of its folder (its
    target copied, then refused) were found after the virtualenv had been installed and the marker written, with a
    .before-ID copy left that refuses the next attempt. Now each is refused naming it, and nothing changed."""
    bundle = make_bundle(tmp_path / "bundle", "b-one", {"alpha": "1.0"})
    registries = tmp_path / "registries"
    registries.mkdir()
    make, said = BAD_REGISTRIES[shape]
    registry = make(registries)
    before = listing(registries)
    done = run_install(bundle, tmp_path / "venv", "--registry", registry)
    assert done.returncode == 1, done.stderr
    assert said in done.stderr and "nothing was changed" in done.stderr, done.stderr
    assert "cp:" not in done.stderr and "a2x-local 0.0.1" not in done.stderr, done.stderr
    assert not (tmp_path / "venv").exists() and listing(registries) == before


def test_a_registry_linked_inside_its_folder_is_copied_with_the_log_duckdb_keeps(tmp_path: Path):
    """F09. `registry.duckdb -> registry-v2.duckdb` is allowed (a2x-local follows it), and DuckDB keeps the log
    beside the target: before, the log copied was `registry.duckdb.wal` (absent), so the copy lacked its changes."""
    bundle = make_bundle(tmp_path / "bundle", "b-one", {"alpha": "1.0"})
    (tmp_path / "registry-v2.duckdb").write_bytes(b"db")
    (tmp_path / "registry-v2.duckdb.wal").write_bytes(b"log")
    os.symlink("registry-v2.duckdb", tmp_path / "registry.duckdb")
    done = run_install(bundle, tmp_path / "venv", "--registry", tmp_path / "registry.duckdb")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "registry.duckdb.before-b-one").read_bytes() == b"db"
    assert (tmp_path / "registry.duckdb.before-b-one.wal").read_bytes() == b"log"


# --- H01: the locks hold only what `a2x-local bundle` writes; H02: wheels/ is checked in one pass ----------------

HASH = "0" * 64
BAD_LOCK_LINES = {
    "-r a device": ("requirements.lock", b"-r /dev/zero\n", 1, "is an option"),
    "-c a named pipe": ("requirements.lock", b"-c {pipe}\n", 1, "is an option"),
    "--find-links outside": ("requirements.lock", b"--find-links {outside}\nbeta==6.6.6 --hash=sha256:" +
                             HASH.encode() + b"\n", 1, "is an option"),
    "-e in project.lock": ("project.lock", b"-e {outside}\n", 1, "is an option"),
    "--index-url": ("requirements.lock", b"--index-url http://example.invalid/simple\n", 1, "is an option"),
    "a URL": ("requirements.lock", b"beta @ http://example.invalid/beta.whl\n", 1, "is a requirement that"),
    "a path": ("requirements.lock", b"{outside}/beta-1.0-py3-none-any.whl\n", 1, "is a requirement that"),
    "no hash": ("requirements.lock", b"beta==1.0\n", 1, "is a requirement with no --hash"),
    "an option continued": ("requirements.lock", b"beta==1.0 \\\n  -r /dev/zero\n", 2, "continues"),
    "a comment continued": ("requirements.lock", b"# x \\\n", 1, "is a comment ending with a backslash"),
    "not UTF-8": ("requirements.lock", b"# caf\xe9\n", 1, "is not UTF-8 text"),
    "a control character": ("requirements.lock", b"# a\rb\n", 1, "holds a control character"),
    "cut short": ("requirements.lock", b"beta==1.0 --hash=sha256:" + HASH.encode() + b" \\", 1, "ends the file"),
}


@pytest.mark.parametrize("shape", BAD_LOCK_LINES)
def test_a_lock_line_that_is_not_a_hashed_pin_is_refused_before_anything_is_made(tmp_path: Path, shape: str):
    """H01. Before: the locks went to `pip install -r` unread: `-r /dev/zero` read gigabytes, `-c PIPE` blocked,
    `--find-links /outside` installed from outside the bundle (and the marker listed it), a comment that was not
    UTF-8 was a pip traceback, each after the venv was made. Now refused naming the file and line, nothing made."""
    bundle = make_bundle(tmp_path / "bundle", "b-one", {"alpha": "1.0"})
    (tmp_path / "outside").mkdir()
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    name, added, offset, said = BAD_LOCK_LINES[shape]
    lock = bundle / name
    where = f" line {len(lock.read_bytes().splitlines()) + offset}" if offset else ""
    added = added.replace(b"{pipe}", str(pipe).encode()).replace(b"{outside}", str(tmp_path / "outside").encode())
    lock.write_bytes(lock.read_bytes() + added)
    write_sums(bundle)
    done = run_install(bundle, tmp_path / "venv", timeout=60)
    assert done.returncode == 1, done.stderr
    assert f"{lock}{where}: {said}" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "venv").exists()


def test_a_lock_of_hashed_pins_continued_and_commented_is_installed(tmp_path: Path):
    """H01: what the builder writes, and the same pins continued with a backslash, still install (P05: in ASCII,
    a tab allowed; a comment in other letters is refused, tests/delivery/test_probes_seventh_round_kit.py)."""
    bundle = make_bundle(tmp_path / "bundle", "b-one", {"alpha": "1.0", "beta": "2.0"})
    lock = bundle / "requirements.lock"
    lines = lock.read_text().splitlines()
    name, digest = lines[2].split(" ", 1)
    lock.write_text(f"{lines[0]}\n\n# a note,\tafter a tab\n{lines[1]}  # alpha-1.0-py3-none-any.whl\n"
                    f"{name} \\\n    {digest}\n")
    write_sums(bundle)
    done = run_install(bundle, tmp_path / "venv")
    assert done.returncode == 0, done.stderr
    assert {"alpha", "beta"} <= installed(tmp_path / "venv")


def test_many_entries_in_wheels_are_checked_in_one_pass(tmp_path: Path):
    """H02. Before: one grep over the whole of SHA256SUMS per entry of wheels/ (12,000 entries: 108 s). Now one pass:
    3,000 listed entries, then one unlisted entry refused, in a few seconds."""
    bundle = make_bundle(tmp_path / "bundle", "b-one", {"alpha": "1.0"})
    for number in range(3000):
        (bundle / "wheels" / f"x{number}.txt").write_bytes(b"")
    write_sums(bundle)
    (bundle / "wheels" / "zz-unlisted.whl").write_bytes(b"")
    started = time.monotonic()
    done = run_install(bundle, tmp_path / "venv", timeout=60)
    took = time.monotonic() - started
    assert done.returncode == 1 and "wheels/zz-unlisted.whl is not listed in SHA256SUMS" in done.stderr, done.stderr
    assert took < 10, f"{took:.1f} s for 3,000 entries"
    assert not (tmp_path / "venv").exists()
