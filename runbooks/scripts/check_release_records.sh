#!/usr/bin/env bash
# Release check: every committed record validates and was measured on REVISION, clean.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
REVISION="${1:?usage: check_release_records.sh REVISION}"
cd "$REPO_ROOT"
mapfile -t records < <(find benchmarks/records -name '*.json' ! -name '*gate*.json' | sort)
[ "${#records[@]}" -gt 0 ] || fail "no record under benchmarks/records"
python3 benchmarks/validate.py "${records[@]}"
python3 - "$REVISION" "${records[@]}" <<'PY'
import json, sys
revision, paths = sys.argv[1], sys.argv[2:]
bad = [p for p in paths if (lambda g: g["revision"] != revision or g["dirty"])(
    json.load(open(p))["environment"]["git"])]
if bad:
    sys.exit("records not measured on a clean " + revision + ":\n  " + "\n  ".join(bad))
print(f"{len(paths)} records measured on clean {revision}")
PY
