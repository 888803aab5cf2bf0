"""Stand-ins for a GPU host's command-line tools, so the runbook scripts that drive them run here:
each is a small shell script put on PATH ahead of the real tools."""

from __future__ import annotations

import stat
from pathlib import Path


def write_stand_ins(bin_dir: Path, bodies: dict[str, str]) -> Path:
    """One executable /bin/sh script per tool name in bin_dir (created), its body as given;
    bin_dir, to put first on PATH."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, body in bodies.items():
        path = bin_dir / name
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return bin_dir
