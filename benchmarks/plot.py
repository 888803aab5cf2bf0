"""Per-case time-ratio bars with the noise band shaded.

    python benchmarks/plot.py gate.json --out gate.png
    python benchmarks/plot.py record.json --reference numpy --out record.png

A gate plots its median paired ratios (candidate / baseline); a record plots, for every other
engine, median time / the reference engine's median time of the same case. Below 1 is faster.
The y axis is logarithmic so 2x faster and 2x slower are the same distance from 1.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):
    from cli_common import ensure_importable

    ensure_importable()

from benchmarks import record as records  # noqa: E402
from benchmarks.gate import GATE_SCHEMA, THRESHOLDS  # noqa: E402


def _case_label(case: dict) -> str:
    lifecycle = "" if case["lifecycle"] == "cold" else " steady"
    operation = "" if case["operation"] == "partial_fit" else " fit"
    transport = "" if case["transport"] == "host" else " dev"
    return (f"{case['shape']} {case['dtype'].replace('float', 'f')} {case['penalty']}"
            f"{lifecycle}{operation}{transport}")


def series_from_gate(gate: dict) -> tuple[list[str], dict[str, list[float]], float, str]:
    cases = [c for c in gate["cases"] if c["median_ratio"] is not None]
    labels = [_case_label(c["case"]) for c in cases]
    name = f"{gate['candidate']['engine']} / {gate['baseline']['engine']}"
    band = max(THRESHOLDS[c["device"]]["noise_band"] for c in cases) if cases else 0.10
    title = (f"gate {name}: {'PASSED' if gate['passed'] else 'FAILED'} "
             f"({gate['created']}, {gate['host']})")
    return labels, {name: [c["median_ratio"] for c in cases]}, band, title


def intervals_from_gate(gate: dict) -> dict[str, list]:
    """Per series of `series_from_gate`, each case's confidence interval (None where the
    gate has none, as in gates written before version 2)."""
    cases = [c for c in gate["cases"] if c["median_ratio"] is not None]
    name = f"{gate['candidate']['engine']} / {gate['baseline']['engine']}"
    return {name: [c.get("interval") for c in cases]}


def series_from_record(record: dict, reference: str | None) -> tuple[list[str],
                                                                       dict[str, list[float]],
                                                                       float, str]:
    sides = [s["label"] for s in record["sides"]]
    measured = {c["label"] for c in record["cases"]}
    reference = reference or next((s for s in sides if s in measured), None)
    if reference not in measured:
        raise ValueError(f"reference {reference!r} has no case in the record; sides with cases: "
                         f"{sorted(measured)}")
    base = {records.comparison_key(c): c for c in record["cases"] if c["label"] == reference}
    keys = sorted(base)
    others = [s for s in sides if s != reference and s in measured]
    by_side = {s: {records.comparison_key(c): c for c in record["cases"] if c["label"] == s}
               for s in others}
    series = {}
    for side in others:
        series[f"{side} / {reference}"] = [
            by_side[side][k]["median"] / base[k]["median"] if k in by_side[side] else float("nan")
            for k in keys]
    labels = [_case_label({"shape": k[0], "dtype": k[2], "penalty": k[3], "lifecycle": k[4],
                           "operation": k[5], "transport": k[6]}) for k in keys]
    band = max(THRESHOLDS[c["device"]]["noise_band"] for c in record["cases"])
    title = (f"median time ratio vs {reference} ({record['environment']['created']}, "
             f"{record['environment']['host']})")
    return labels, series, band, title


def render(labels: list[str], series: dict[str, list[float]], band: float, title: str,
           out: Path, intervals: dict[str, list] | None = None) -> None:
    """Bars of the ratios from 1, the noise band shaded; `intervals` (per series, a [low, high]
    or None per case) draws each case's confidence interval as an error bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    import numpy as np

    if not labels or not series:
        raise ValueError("nothing to plot: no case with a ratio")
    width = 0.8 / len(series)
    positions = np.arange(len(labels))
    figure, axes = plt.subplots(figsize=(max(8.0, 0.45 * len(labels) + 3), 5.5))
    axes.axhspan(1 / (1 + band), 1 + band, color="0.85", zorder=0,
                 label=f"noise band ±{band:.0%}")
    axes.axhline(1.0, color="0.3", linewidth=0.8, zorder=1)
    finite = []
    for i, (name, ratios) in enumerate(series.items()):
        # Bars grow from 1 so faster and slower point in opposite directions.
        values = np.asarray(ratios, dtype=float)
        finite.extend(values[np.isfinite(values)])
        where = positions + (i - (len(series) - 1) / 2) * width
        axes.bar(where, values - 1.0, width, bottom=1.0, label=name, zorder=2)
        spans = (intervals or {}).get(name)
        if spans:
            have = [j for j, span in enumerate(spans) if span is not None]
            if have:
                lows = np.array([spans[j][0] for j in have])
                highs = np.array([spans[j][1] for j in have])
                finite.extend(np.concatenate([lows, highs]))
                axes.errorbar(where[have], values[have],
                              yerr=[values[have] - lows, highs - values[have]], fmt="none",
                              ecolor="0.15", elinewidth=1.0, capsize=2, zorder=3,
                              label="95% interval" if i == 0 else None)
    axes.set_yscale("log")
    low = min(min(finite, default=1.0), 1 / (1 + band)) / 1.25
    high = max(max(finite, default=1.0), 1 + band) * 1.25
    axes.set_ylim(low, high)
    ticks = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}")
    axes.yaxis.set_major_formatter(ticks)
    axes.yaxis.set_minor_formatter(ticks)
    axes.set_ylabel("time ratio (below 1 = faster)")
    axes.set_xticks(positions, labels, rotation=60, ha="right", fontsize=8)
    axes.set_title(title, fontsize=10)
    axes.legend(fontsize=8)
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=110)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input", help="a gate.json or a v2 record")
    parser.add_argument("--reference", default=None,
                        help="record only: the side every other is divided by (default: first)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    data = records.load(args.input)
    try:
        intervals = None
        if data.get("schema") == GATE_SCHEMA:
            parts = series_from_gate(data)
            intervals = intervals_from_gate(data)
        elif data.get("schema") == records.SCHEMA_NAME:
            parts = series_from_record(data, args.reference)
        else:
            raise ValueError(f"{args.input} is neither a gate nor a shape-sweep record "
                             f"(schema {data.get('schema')!r})")
        render(*parts, args.out, intervals=intervals)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
