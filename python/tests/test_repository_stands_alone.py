"""The repository cites no file outside it: its users never see the briefing folder it was
built from, so every reference must point at the repository's own docs/."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OUTSIDE = re.compile(
    r"\.\./shared|spec/(ALGORITHM|ABI|PYTHON|GOLDEN|BENCHMARKS|GPU-FLOORS)\.md"
    r"|(?<![\w/])(ALGORITHM|GOLDEN|BENCHMARKS|GPU-FLOORS|DESIGN)\.md"
)


def test_no_tracked_file_cites_a_file_outside_the_repository():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout (an installed package has no repository to scan)")
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    this = Path(__file__).resolve().relative_to(ROOT).as_posix()
    hits = []
    for name in files:
        path = ROOT / name
        if name == this or not path.is_file() or path.suffix in {".npz", ".png", ".so"}:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        hits += [f"{name}:{n}" for n, line in enumerate(text.splitlines(), 1)
                 if OUTSIDE.search(line)]
    assert hits == []
