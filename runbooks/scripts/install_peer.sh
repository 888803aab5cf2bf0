#!/usr/bin/env bash
# Installs the external peer, renewable-huber 0.7.1 with its Rust CPU engine, into its own
# virtual environment (default /tmp/peer-venv), plus threadpoolctl so its NumPy BLAS can be
# pinned like ours. Prints the interpreter to pass as --peer-python.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
VENV="${1:-/tmp/peer-venv}"
if [ ! -x "$VENV/bin/python" ]; then python3 -m venv "$VENV" >&2; fi
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
  "renewable-huber==0.7.1" "renewable-huber-native-cpu==0.7.1" threadpoolctl >&2
"$VENV/bin/python" - >&2 <<'PY'
import renewable_huber
assert renewable_huber.__version__ == "0.7.1", renewable_huber.__version__
PY
echo "$VENV/bin/python"
