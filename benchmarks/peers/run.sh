#!/usr/bin/env bash
# Benchmarks plait against peer engines: makes the peers' own venv from the pinned
# requirements.txt (again only when that file changes), then runs run.py with it.
# Arguments go to run.py (--only, --skip-big, --out); --make-venv alone only makes the
# venv (agent_loop.py uses it).  PEERS_PYTHON picks the Python
# the venv is made from (default python3); PLAIT_PYTHON the one that runs plait.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv"
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$here/requirements.txt" | cut -d' ' -f1)"
if [[ ! -x "$venv/bin/python" || "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
  echo "making $venv from requirements.txt" >&2
  "${PEERS_PYTHON:-python3}" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  "$venv/bin/python" -m pip install --quiet -r "$here/requirements.txt"
  echo "$want" > "$stamp"
fi
if [[ "${1:-}" == "--make-venv" ]]; then exit 0; fi
exec "$venv/bin/python" "$here/run.py" "$@"
