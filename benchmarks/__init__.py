"""Benchmark tooling for renewable-huber: shape sweep, interleaved A/B runner, gates,
record validator and plots. Timings live in JSON records, never in test assertions."""
