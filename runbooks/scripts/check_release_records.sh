#!/usr/bin/env bash
# Release check: the release's benchmark records (the files or folders given, as committed by
# the CPU and GPU runbooks) validate and were measured on REVISION with a clean tree. Records of
# other schemas among them (Dask scaling, coverage study) are not runbook records and are left
# out; so are gate files, which are checked by their own exit codes.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
REVISION="${1:?usage: check_release_records.sh REVISION RECORD_OR_FOLDER...}"
shift
[ "$#" -gt 0 ] || fail "usage: check_release_records.sh REVISION RECORD_OR_FOLDER... (the release's records)"
cd "$REPO_ROOT"
mapfile -t records < <(find "$@" -name '*.json' ! -name '*gate*.json' -print0 \
  | xargs -0 -r grep -l '"schema": "renewable-huber-shape-sweep"' | sort)
[ "${#records[@]}" -gt 0 ] || fail "no shape-sweep record under $*"
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
