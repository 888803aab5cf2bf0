"""The first recorded update of an stg.py trace, chunk by chunk: each host-to-device copy (its
start, length, bytes and the DMA engine's idle time before it) and the host's CUDA calls
around the first chunks, in microseconds from the first copy.

    python3 chunk_timeline.py stg-m-1000000.json.gz
"""

import gzip
import json
import sys

for path in sys.argv[1:]:
    events = json.load(gzip.open(path, "rt"))["traceEvents"]
    copies = sorted((e for e in events if e.get("cat") == "gpu_memcpy"), key=lambda e: e["ts"])
    calls = sorted((e for e in events if e.get("cat") == "cuda_runtime"), key=lambda e: e["ts"])
    first = [copies[0]]
    for copy in copies[1:]:  # the first update: until the DMA engine rests for 3 ms
        if copy["ts"] - (first[-1]["ts"] + first[-1]["dur"]) > 3000:
            break
        first.append(copy)
    t0 = first[0]["ts"]
    moved = sum(c["args"].get("bytes", 0) for c in first)
    busy = sum(c["dur"] for c in first)
    print(f"{path}: {len(first)} copies, {moved / 1e6:.1f} MB, span "
          f"{first[-1]['ts'] + first[-1]['dur'] - t0:.1f} us, DMA busy {busy:.1f} us "
          f"({moved / busy / 1e3:.1f} GB/s while busy)")
    end = None
    for copy in first[:14]:
        idle = copy["ts"] - end if end is not None else 0.0
        print(f"  copy +{copy['ts'] - t0:9.1f} for {copy['dur']:7.1f}, idle before {idle:7.1f}, "
              f"{copy['args'].get('bytes', 0):>10} bytes")
        end = copy["ts"] + copy["dur"]
    for call in calls:
        if t0 - 400 <= call["ts"] <= t0 + 700:
            print(f"  host +{call['ts'] - t0:9.1f} .. +{call['ts'] + call['dur'] - t0:9.1f} "
                  f"{call['name']}")
