"""Progress bars for the command line: tqdm when installed (the `cli` extra), else a plain
one-line counter on stderr. Disabled when stderr is not a terminal, so logs and pipes stay
clean."""

from __future__ import annotations

import sys
import time


class _SilentProgress:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


class _PlainProgress:
    """Rewrites one stderr line in place; redraws at most every 0.2 s so printing never
    costs more than the work it reports on."""

    _min_interval = 0.2

    def __init__(self, total: int | None, desc: str, unit: str, stream):
        self._total = total
        self._desc = desc
        self._unit = unit
        self._stream = stream
        self._count = 0
        self._start = time.perf_counter()
        self._last_draw = 0.0

    def update(self, n: int) -> None:
        self._count += n
        now = time.perf_counter()
        if now - self._last_draw >= self._min_interval:
            self._draw(now)

    def _draw(self, now: float) -> None:
        self._last_draw = now
        elapsed = max(now - self._start, 1e-9)
        if self._total is None:
            done = f"{self._count:,}"
        else:
            share = 100.0 * self._count / self._total if self._total else 100.0
            done = f"{share:3.0f}% {self._count:,}/{self._total:,}"
        self._stream.write(f"\r{self._desc}: {done} {self._unit} "
                           f"({self._count / elapsed:,.0f} {self._unit}/s)")
        self._stream.flush()

    def close(self) -> None:
        self._draw(time.perf_counter())
        self._stream.write("\n")
        self._stream.flush()


def progress_bar(total: int | None, *, desc: str, unit: str, enabled: bool):
    """An object with update(n) and close(). `enabled` is the caller's wish (--no-progress
    clears it); the bar still stays silent when stderr is not a terminal. With a total the bar
    shows the share done (a CSV file is measured in bytes read, unit "B", since its row count
    is unknown until the end; a Parquet file in rows)."""
    stream = sys.stderr
    if not enabled or not stream.isatty():
        return _SilentProgress()
    try:
        from tqdm import tqdm
    except ImportError:
        return _PlainProgress(total, desc, unit, stream)
    return tqdm(total=total, desc=desc, unit=unit, unit_scale=True,
                unit_divisor=1024 if unit == "B" else 1000, file=stream,
                dynamic_ncols=True, leave=False)
