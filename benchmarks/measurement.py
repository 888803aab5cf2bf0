"""Summary statistics of one case's samples and the repetition sizing rule."""

from __future__ import annotations

import math

import numpy as np

MIN_SAMPLE_SECONDS = 0.1
MAX_REPETITIONS = 100_000


def repetitions_for(single_run_seconds: float,
                    min_sample_seconds: float = MIN_SAMPLE_SECONDS) -> int:
    """Repetitions per sample so a sample lasts at least min_sample_seconds."""
    if not math.isfinite(single_run_seconds) or single_run_seconds < 0:
        raise ValueError(f"single_run_seconds must be finite and >= 0, got {single_run_seconds}")
    if single_run_seconds == 0:
        return MAX_REPETITIONS
    repetitions = math.ceil(min_sample_seconds / single_run_seconds)
    return int(min(MAX_REPETITIONS, max(1, repetitions)))


def relative_mad(samples) -> float:
    """median(|x - median|) / median: the spread reported beside every sample and gate."""
    x = np.asarray(samples, dtype=np.float64)
    med = float(np.median(x))
    return float(np.median(np.abs(x - med)) / med)


def summarize(samples) -> dict:
    x = np.asarray(samples, dtype=np.float64)
    if x.size == 0:
        raise ValueError("no samples to summarize")
    return {
        "median": float(np.median(x)),
        "min": float(x.min()),
        "max": float(x.max()),
        "rel_mad": relative_mad(x),
    }
