#!/usr/bin/env bash
# Install this offline bundle of a2x-local into a virtual environment, from the bundle's files only.
#
#   ./install.sh VENV [--registry DB] [--force]
#
# 1. checks the bundle: every file SHA256SUMS lists is a regular file inside it and matches; wheels/ holds nothing
#    SHA256SUMS does not list by its exact path;
# 2. VENV must be new, empty, or a virtual environment a bundle installed into before (it holds the marker
#    a2x-local-bundle.txt); --force installs into any other folder (nothing already in it is removed);
# 3. creates VENV with Python 3.11 when it does not exist ($A2X_PYTHON names the interpreter);
# 4. installs the locked wheels with `pip --no-index --no-deps --require-hashes` (pip's own configuration and PIP_*
#    variables are ignored, so no index or other folder is ever consulted), then a2x-local itself;
# 5. over an earlier bundle's install (an upgrade), removes what that bundle installed and this one does not carry
#    (only packages its marker lists: never one this script did not install), then writes the marker, which lists
#    only packages this bundle carries that were absent before it ran or that the earlier marker listed: one the
#    operator had (at any version; before a --force install) never becomes the bundle's to remove;
# 6. with --registry DB: copies DB to DB.before-BUNDLE_ID first, then opens it once with the new a2x-local, which
#    applies the registry's migrations and records this bundle in its history (`a2x-local stats --db DB`).
# Stop any a2x-local process that uses the registry (serve, nightly) before an upgrade, and start it again after.
set -euo pipefail

MARKER="a2x-local-bundle.txt"
usage() { echo "usage: $0 VENV [--registry DB] [--force]" >&2; exit 2; }
fail() { echo "install: error: $1" >&2; [ -n "${2:-}" ] && echo "install: hint: $2" >&2; exit 1; }

[ $# -ge 1 ] || usage
case "$1" in -h|--help) sed -n '2,19p' "$0"; exit 0 ;; -*) usage ;; esac
venv="$1"; shift
registry=""
force=0
while [ $# -gt 0 ]; do
  case "$1" in
    --registry) [ $# -ge 2 ] || usage; registry="$2"; shift 2 ;;
    --force) force=1; shift ;;
    *) usage ;;
  esac
done

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

# --- 1. the bundle ------------------------------------------------------------------------------------------------
copy_again="copy the bundle again from its source"
for file in SHA256SUMS BUNDLE_ID PLATFORM requirements.lock project.lock; do
  # A link or a special file would be read in place of the bundle's own (a named pipe blocks, a device never ends).
  [ -f "$file" ] && [ ! -L "$file" ] || fail "$here/$file is missing or not a regular file" "$copy_again"
done
# Every line: 64 hex digits, two spaces, a plain relative path (no '..', no leading '/'), as `a2x-local bundle` writes.
bad_line="$(grep -nvE '^[0-9a-f]{64}  [A-Za-z0-9_+][A-Za-z0-9._+/-]*$' SHA256SUMS | head -1 || true)"
[ -z "$bad_line" ] || fail "SHA256SUMS line ${bad_line%%:*} is not 'SHA-256  PATH' with a plain path inside the bundle" "$copy_again"
bad_line="$(grep -nE '  (.*/)?\.\.?(/|$)|//' SHA256SUMS | head -1 || true)"
[ -z "$bad_line" ] || fail "SHA256SUMS line ${bad_line%%:*} names a path with '.' or '..' parts" "$copy_again"
listed="$(cut -c67- SHA256SUMS)"
while IFS= read -r file; do
  [ -f "$file" ] && [ ! -L "$file" ] || fail "$file (listed in SHA256SUMS) is missing or not a regular file" "$copy_again"
done <<< "$listed"
bundle_id="$(head -c 200 BUNDLE_ID | head -1)"
[[ "$bundle_id" =~ ^[A-Za-z0-9][A-Za-z0-9._+-]*$ ]] || fail "BUNDLE_ID does not hold a bundle id" "$copy_again"

echo "install: checking the bundle $bundle_id against SHA256SUMS" >&2
sha256sum --check --quiet --strict SHA256SUMS \
  || fail "files of the bundle do not match SHA256SUMS (named above)" "$copy_again"
while IFS= read -r -d '' file; do
  # A plain name first: grep -F would take each line of a name with a line break as a pattern of its own.
  [[ "$file" =~ ^wheels/[A-Za-z0-9][A-Za-z0-9._+-]*$ ]] \
    || fail "wheels/ holds an entry whose name is no plain file name: $(printf '%q' "$file")" "remove it: wheels/ holds only the bundle's wheels"
  [ -f "$file" ] && [ ! -L "$file" ] || fail "$file is not a regular file" "remove it: wheels/ holds only the bundle's wheels"
  grep -qxF -- "$file" <<< "$listed" || fail "$file is not listed in SHA256SUMS" "remove it: only listed wheels are installed"
done < <(find wheels -mindepth 1 -print0)

describe() {  # what a folder holds, in a few words: its first entries, and how many Python packages
  local entries packages
  entries="$(ls -A "$1" 2>/dev/null | head -6 | tr '\n' ' ' || true)"
  packages="$(find "$1" -maxdepth 5 -path '*/site-packages/*.dist-info' -type d 2>/dev/null | wc -l || true)"
  if [ "${packages:-0}" -gt 0 ]; then printf 'a Python environment with %s installed packages; ' "$packages"; fi
  printf 'it holds: %s' "${entries% }"
}

# --- 2. the virtual environment -----------------------------------------------------------------------------------
marker="$venv/$MARKER"
upgrade=0
if [ -e "$venv" ] || [ -L "$venv" ]; then
  [ -d "$venv" ] || fail "$venv exists and is not a folder" "give the path of a new virtual environment"
  if [ -n "$(ls -A "$venv")" ]; then
    if [ -e "$marker" ] || [ -L "$marker" ]; then
      [ -f "$marker" ] && [ ! -L "$marker" ] || fail "$marker is not a regular file" "remove it, then run again with --force"
      upgrade=1
    elif [ "$force" = 0 ]; then
      fail "$venv is not empty and no a2x-local bundle installed into it ($(describe "$venv"))" \
        "give a new or empty folder; to install into this one anyway, add --force (nothing already in it is removed, but packages the bundle also carries are replaced by its versions)"
    else
      echo "install: --force: installing into $venv, which no bundle made; nothing already in it is removed" >&2
    fi
  fi
fi

py="${A2X_PYTHON:-python3.11}"
if [ ! -x "$venv/bin/python" ]; then
  command -v "$py" >/dev/null 2>&1 || fail "Python 3.11 ($py) not found" "install Python 3.11 with its venv module, or set A2X_PYTHON"
else
  py="$venv/bin/python"
fi
"$py" - "$(head -c 200 PLATFORM | head -1)" <<'PY' || fail "this bundle does not fit $py" "use Python 3.11 on Linux x86-64, or a bundle built for this machine"
import platform, sys
want = sys.argv[1]
have = f"cp{sys.version_info[0]}{sys.version_info[1]}-{sys.platform}-{platform.machine()}"
if have != want:
    print(f"install: the bundle is for {want}, this interpreter is {have}", file=sys.stderr)
    raise SystemExit(1)
PY

if [ -n "$registry" ]; then
  [ -f "$registry" ] || fail "$registry: no such registry (or not a regular file)" "give the registry file the install serves (--db)"
  backup="$registry.before-$bundle_id"
  for copy in "$backup" "$backup.wal"; do
    # The copy of an earlier attempt may be the only copy from before the upgrade: never overwritten.
    if [ -e "$copy" ] || [ -L "$copy" ]; then
      fail "$copy already exists" "it may be the only copy from before this upgrade: move it aside, then run again"
    fi
  done
fi

# --- 3-5. install -------------------------------------------------------------------------------------------------
# Only this bundle's wheels: no index, no pip configuration, no PIP_* variables.
for name in $(env | sed -n 's/^\(PIP_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$name"; done
export PIP_CONFIG_FILE=/dev/null PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1
pip_install=(-m pip install --no-index --find-links "$here/wheels" --no-deps --require-hashes --quiet)

if [ ! -x "$venv/bin/python" ]; then
  echo "install: creating $venv" >&2
  "$py" -m venv "$venv"
fi
# What the environment holds before this bundle installs anything (name==version, one a line): a package in it is
# the bundle's only where the earlier marker says so, whatever version the bundle puts in its place.
had="$("$venv/bin/python" - <<'PY'
import importlib.metadata as md, re
for dist in md.distributions():
    print(f"{re.sub(r'[-_.]+', '-', dist.metadata['Name']).lower()}=={dist.version}")
PY
)"
echo "install: installing $(grep -c '==' requirements.lock) packages into $venv (a few minutes)" >&2
if grep -q '==' requirements.lock; then "$venv/bin/python" "${pip_install[@]}" -r requirements.lock; fi
"$venv/bin/python" "${pip_install[@]}" --force-reinstall -r project.lock

# An upgrade: what the earlier bundle installed (its marker says) and this one does not carry goes; nothing else.
if [ "$upgrade" = 1 ]; then
  stale="$("$venv/bin/python" - "$marker" requirements.lock project.lock <<'PY'
import importlib.metadata as md, re, sys
norm = lambda name: re.sub(r"[-_.]+", "-", name).lower()
plain = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")   # a distribution name, never an option for pip
before = {line.split()[1].split("==")[0] for line in open(sys.argv[1], encoding="utf-8")
          if line.startswith("package ") and len(line.split()) == 2}
keep = {"pip"} | {norm(line.split("==")[0]) for path in sys.argv[2:] for line in open(path) if "==" in line}
installed = {norm(d.metadata["Name"]) for d in md.distributions()}
print(" ".join(sorted(name for name in before if plain.match(name) and norm(name) not in keep
                      and norm(name) in installed)))
PY
)"
  if [ -n "$stale" ]; then
    echo "install: removing what the earlier bundle installed and this one does not carry: $stale" >&2
    # shellcheck disable=SC2086  # one word per distribution
    "$venv/bin/python" -m pip uninstall --yes --quiet $stale
  fi
fi
written="$(mktemp "$venv/.$MARKER.XXXXXX")"   # a new file (never one that was there), renamed over the marker
{
  echo "# Written by a2x-local's install.sh: the bundle installed here and the packages it installed. An upgrade"
  echo "# removes only packages listed here that the newer bundle does not carry. Do not edit."
  echo "bundle $bundle_id"
  "$venv/bin/python" - "$had" "$([ "$upgrade" = 1 ] && echo "$marker")" requirements.lock project.lock <<'PY'
import re, sys
norm = lambda name: re.sub(r"[-_.]+", "-", name).lower()
had = {line.split("==")[0] for line in sys.argv[1].splitlines() if "==" in line}
ours = set()   # what the earlier marker listed: the bundle's, even at the same version
if sys.argv[2]:
    ours = {norm(line.split()[1].split("==")[0]) for line in open(sys.argv[2], encoding="utf-8")
            if line.startswith("package ") and len(line.split()) == 2}
pinned = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^ ]+)")
for path in sys.argv[3:]:
    for line in open(path, encoding="utf-8"):
        found = pinned.match(line)
        if found and (norm(found[1]) not in had or norm(found[1]) in ours):
            print(f"package {found[1]}=={found[2]}")
PY
} > "$written"
chmod 644 "$written"
mv -f "$written" "$marker"

"$venv/bin/a2x-local" --version
if [ -n "$registry" ]; then
  cp -p "$registry" "$backup"
  if [ -f "$registry.wal" ]; then cp -p "$registry.wal" "$backup.wal"; fi  # changes not yet checkpointed
  echo "install: copied $registry to $backup (to roll back: install the older bundle and copy it back)" >&2
  "$venv/bin/a2x-local" stats --db "$registry"
fi
echo "install: done: $bundle_id in $venv" >&2
