# Sourced by the runbook scripts: repository root, dated record names, step banners.
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DATE="$(date -u +%Y-%m-%d)"
HOST_TAG="$(hostname -s 2>/dev/null || echo host)"
export PYTHONUNBUFFERED=1

step() { printf '\n=== %s ===\n' "$*"; }
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
