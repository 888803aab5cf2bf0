#!/usr/bin/env bash
# Run in a checkout after the GPU stages: unpacks the results tarball copied back from the GPU
# host (the folder holding gpu-*.tar.gz) into benchmarks/records/ and validates every record in
# it (device.json and roofline.json, the roofline tables' inputs and results, are of other
# schemas). Commit the folder it prints.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
FILES_AT="${1:?usage: collect_device_records.sh FILES_AT}"
tarball="$(ls "$FILES_AT"/gpu-*.tar.gz | head -n 1)" || fail "no gpu-*.tar.gz in $FILES_AT"
tar -C "$REPO_ROOT/benchmarks/records" -xzf "$tarball"
folder="$REPO_ROOT/benchmarks/records/$(basename "$tarball" .tar.gz)"
find "$folder" -name '*.json' ! -name 'gate.json' ! -name 'device.json' ! -name 'roofline.json' -print0 | xargs -0 -r python3 "$REPO_ROOT/benchmarks/validate.py"
echo "$folder"
