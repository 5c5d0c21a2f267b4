#!/usr/bin/env bash
# Install this offline bundle of a2x-local into a virtual environment, from the bundle's files only.
#
#   ./install.sh VENV [--registry DB]
#
# 1. checks every file against SHA256SUMS (and that no unlisted wheel lies in wheels/);
# 2. creates VENV with Python 3.11 when it does not exist ($A2X_PYTHON names the interpreter);
# 3. installs the locked wheels with `pip --no-index --no-deps --require-hashes` (pip's own configuration and PIP_*
#    variables are ignored, so no index or other folder is ever consulted), then a2x-local itself;
# 4. over an older install (an upgrade), removes what this bundle no longer has;
# 5. with --registry DB: copies DB to DB.before-BUNDLE_ID first, then opens it once with the new a2x-local, which
#    applies the registry's migrations and records this bundle in its history (`a2x-local stats --db DB`).
# Stop any a2x-local process that uses the registry (serve, nightly) before an upgrade, and start it again after.
set -euo pipefail

usage() { echo "usage: $0 VENV [--registry DB]" >&2; exit 2; }
fail() { echo "install: error: $1" >&2; [ -n "${2:-}" ] && echo "install: hint: $2" >&2; exit 1; }

[ $# -ge 1 ] || usage
case "$1" in -h|--help) sed -n '2,14p' "$0"; exit 0 ;; -*) usage ;; esac
venv="$1"; shift
registry=""
while [ $# -gt 0 ]; do
  case "$1" in
    --registry) [ $# -ge 2 ] || usage; registry="$2"; shift 2 ;;
    *) usage ;;
  esac
done

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bundle_id="$(cat "$here/BUNDLE_ID")"
cd "$here"

echo "install: checking the bundle $bundle_id against SHA256SUMS" >&2
sha256sum --check --quiet --strict SHA256SUMS \
  || fail "files of the bundle do not match SHA256SUMS (named above)" "copy the bundle again from its source"
for file in wheels/*; do
  grep -qF "  $file" SHA256SUMS || fail "$file is not listed in SHA256SUMS" "remove it: only listed wheels are installed"
done

py="${A2X_PYTHON:-python3.11}"
if [ ! -x "$venv/bin/python" ]; then
  command -v "$py" >/dev/null 2>&1 || fail "Python 3.11 ($py) not found" "install Python 3.11 with its venv module, or set A2X_PYTHON"
else
  py="$venv/bin/python"
fi
"$py" - "$(cat "$here/PLATFORM")" <<'PY' || fail "this bundle does not fit $py" "use Python 3.11 on Linux x86-64, or a bundle built for this machine"
import platform, sys
want = sys.argv[1]
have = f"cp{sys.version_info[0]}{sys.version_info[1]}-{sys.platform}-{platform.machine()}"
if have != want:
    print(f"install: the bundle is for {want}, this interpreter is {have}", file=sys.stderr)
    raise SystemExit(1)
PY

# Only this bundle's wheels: no index, no pip configuration, no PIP_* variables.
for name in $(env | sed -n 's/^\(PIP_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$name"; done
export PIP_CONFIG_FILE=/dev/null PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1
pip_install=(-m pip install --no-index --find-links "$here/wheels" --no-deps --require-hashes --quiet)

if [ ! -x "$venv/bin/python" ]; then
  echo "install: creating $venv" >&2
  "$py" -m venv "$venv"
fi
echo "install: installing $(grep -c '==' requirements.lock) packages into $venv (a few minutes)" >&2
"$venv/bin/python" "${pip_install[@]}" -r requirements.lock
"$venv/bin/python" "${pip_install[@]}" --force-reinstall -r project.lock

# An upgrade: what the previous bundle had and this one has not goes.
stale="$("$venv/bin/python" - requirements.lock project.lock <<'PY'
import importlib.metadata as md, re, sys
norm = lambda name: re.sub(r"[-_.]+", "-", name).lower()
keep = {"pip"} | {norm(line.split("==")[0]) for path in sys.argv[1:] for line in open(path) if "==" in line}
print(" ".join(sorted({d.metadata["Name"] for d in md.distributions() if norm(d.metadata["Name"]) not in keep})))
PY
)"
if [ -n "$stale" ]; then
  echo "install: removing what this bundle does not carry: $stale" >&2
  # shellcheck disable=SC2086  # one word per distribution
  "$venv/bin/python" -m pip uninstall --yes --quiet $stale
fi

"$venv/bin/a2x-local" --version
if [ -n "$registry" ]; then
  [ -f "$registry" ] || fail "$registry: no such registry" "give the registry file the install serves (--db)"
  backup="$registry.before-$bundle_id"
  cp -p "$registry" "$backup"
  if [ -f "$registry.wal" ]; then cp -p "$registry.wal" "$backup.wal"; fi  # changes not yet checkpointed
  echo "install: copied $registry to $backup (to roll back: install the older bundle and copy it back)" >&2
  "$venv/bin/a2x-local" stats --db "$registry"
fi
echo "install: done: $bundle_id in $venv" >&2
