"""The demo job: stream the contaminated simulation through the renewable estimator and
compare it with the oracle (one Huber fit on all rows) and with ordinary least squares."""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from .progress import progress_bar
from .simulation import SimulatedData, simulate


@dataclasses.dataclass(frozen=True)
class MethodResult:
    name: str
    parameters: np.ndarray  # slopes then intercept
    seconds: float


@dataclasses.dataclass(frozen=True)
class DemoResult:
    data: SimulatedData
    batch_size: int
    backend: str
    tau: float
    renewable: MethodResult
    oracle: MethodResult
    ols: MethodResult
    #: (batches, P): the renewable parameters after each batch
    trajectory: np.ndarray
    #: rows seen after each batch
    rows_seen: np.ndarray

    def coef_error(self, method: MethodResult) -> float:
        """L2 distance of the slopes (intercept excluded) to the true coefficients."""
        return float(np.linalg.norm(method.parameters[:-1] - self.data.true_coef))

    def intercept_error(self, method: MethodResult) -> float:
        """Signed: the one-sided outliers push every intercept up, least squares the most."""
        return float(method.parameters[-1] - self.data.true_intercept)

    @property
    def renewable_to_oracle(self) -> float:
        """L2 distance over all parameters, intercept included."""
        return float(np.linalg.norm(self.renewable.parameters - self.oracle.parameters))


def _parameters(model) -> np.ndarray:
    return np.append(np.asarray(model.coef_, dtype=np.float64), float(model.intercept_))


def run_demo(*, n_rows: int, n_features: int, batch_size: int, seed: int,
             backend: str = "auto", tau: float = 1.345, show_progress: bool = True) -> DemoResult:
    from .estimator import RenewableHuberRegressor

    if batch_size < 1:
        raise ValueError(f"--batch-size must be >= 1, got {batch_size}")
    data = simulate(n_rows, n_features, seed=seed)

    model = RenewableHuberRegressor(tau=tau, backend=backend)
    trajectory = []
    rows_seen = []
    bar = progress_bar(n_rows, desc="renewable stream", unit="rows", enabled=show_progress)
    start = time.perf_counter()
    try:
        for first in range(0, n_rows, batch_size):
            stop = min(first + batch_size, n_rows)
            model.partial_fit(data.X[first:stop], data.y[first:stop])
            trajectory.append(_parameters(model))
            rows_seen.append(stop)
            bar.update(stop - first)
    finally:
        bar.close()
    renewable = MethodResult(f"renewable Huber ({len(trajectory)} batches)",
                             _parameters(model), time.perf_counter() - start)

    start = time.perf_counter()
    oracle_model = RenewableHuberRegressor(tau=tau, backend=backend).fit(data.X, data.y)
    oracle = MethodResult("oracle Huber (one fit, all rows)", _parameters(oracle_model),
                          time.perf_counter() - start)

    start = time.perf_counter()
    design = np.column_stack([data.X, np.ones(n_rows)])
    ols_parameters = np.linalg.lstsq(design, data.y, rcond=None)[0]
    ols = MethodResult("OLS (numpy.linalg.lstsq)", ols_parameters, time.perf_counter() - start)

    return DemoResult(data=data, batch_size=batch_size, backend=model.backend_, tau=tau,
                      renewable=renewable, oracle=oracle, ols=ols,
                      trajectory=np.array(trajectory), rows_seen=np.array(rows_seen))


def format_report(result: DemoResult) -> str:
    data = result.data
    n_rows, n_features = data.X.shape
    outliers = float(np.mean(data.is_outlier))
    lines = [
        f"Simulated stream: {n_rows:,} rows x {n_features} features (AR(0.5) Gaussian), "
        f"t(3) errors, {outliers:.1%} gross outliers (+N(20, 5^2))",
        f"Batches of {result.batch_size:,}; tau = {result.tau}; backend = {result.backend}",
        "",
    ]
    header = ("method", "coef L2 error", "intercept error", "time (s)")
    rows = [(m.name, f"{result.coef_error(m):.4f}", f"{result.intercept_error(m):+.4f}",
             f"{m.seconds:.3f}") for m in (result.renewable, result.oracle, result.ols)]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, tuple("-" * w for w in widths), *rows]:
        numbers = zip(row[1:], widths[1:], strict=True)
        cells = [f"{row[0]:<{widths[0]}}"] + [f"{c:>{w}}" for c, w in numbers]
        lines.append("  ".join(cells))
    lines.append("")
    lines.append("renewable vs oracle L2 distance (coef + intercept): "
                 f"{result.renewable_to_oracle:.2e}")
    return "\n".join(lines)


def plot_trajectory(result: DemoResult, path: str) -> None:
    """Each coefficient (and the intercept) after every batch, with the truth dashed."""
    try:
        import matplotlib
    except ImportError as exc:
        raise ModuleNotFoundError(
            "--plot needs matplotlib: pip install 'renewable-huber[plot]'") from exc
    # A file is the only output, so never ask for a display (headless hosts, CI).
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    truth = result.data.true_parameters
    labels = [f"x{j}" for j in range(truth.size - 1)] + ["intercept"]
    fig, ax = plt.subplots(figsize=(9, 5.5))
    try:
        for j, label in enumerate(labels):
            (line,) = ax.plot(result.rows_seen, result.trajectory[:, j], label=label)
            ax.axhline(truth[j], color=line.get_color(), linestyle="--", linewidth=0.8)
        ax.set_xlabel("rows seen")
        ax.set_ylabel("estimate (dashed: truth)")
        ax.set_title("Renewable Huber estimates across batches")
        ax.legend(ncol=2, fontsize="small", loc="center left", bbox_to_anchor=(1.0, 0.5))
        fig.tight_layout()
        fig.savefig(path, dpi=110)
    finally:
        plt.close(fig)
