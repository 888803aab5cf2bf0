"""The renewable problem of a batch whose rows stay on a Dask cluster.

The reference solvers reach the rows only through the row functions of core/objective.py.
DistributedProblem registers its own: the residual is an opaque handle (the beta it belongs
to, with the sums already computed there), and every sum over rows is one map over the
batch's partitions followed by a reduction on the client in partition order. Everything else
(f, g, H, the majoriser, the line search, LAMM, the linear-solve ladder, the fold into the
state) is the reference code itself, run on the client with P-sized arrays.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..core.newton_solver import line_search_candidate
from ..core.objective import (
    RenewableProblem,
    curvature_gram,
    expect_line_search,
    loss_sum,
    majoriser_gram,
    meat_gram,
    residual,
    score_product,
    weighted_squared_norm,
)


class RowsAt:
    """The residual r = y - X beta of a distributed batch, as a handle: beta (a private copy)
    and the sums over rows already computed at it (filled as passes return)."""

    __slots__ = ("beta", "sums")

    def __init__(self, beta):
        self.beta = np.array(beta, copy=True)
        self.sums: dict[str, Any] = {}


@dataclasses.dataclass(frozen=True)
class DistributedProblem(RenewableProblem):
    """A RenewableProblem whose X, y and w are None: `partitions` (a DaskBatch) holds them.

    fused: the statistics every pass computes together. A Newton iteration needs f at each
    trial and g and H at the accepted one, so computing the three in one pass costs one
    reading of the rows and one round trip per iteration instead of two; LAMM never needs H.
    """

    partitions: Any = None
    fused: tuple[str, ...] = ("loss", "score")
    #: the line search's next trial points (expect_line_search), by the bytes of their beta,
    #: each with its loss summed already
    expected: dict = dataclasses.field(default_factory=dict, compare=False, repr=False)


def _sum(problem: DistributedProblem, r: RowsAt, kind: str):
    if kind not in r.sums:
        kinds = problem.fused if kind in problem.fused else (kind,)
        r.sums.update(
            problem.partitions.sums(r.beta, kinds, problem.tau, problem.bandwidth)
        )
    return r.sums[kind]


@residual.register
def _(problem: DistributedProblem, beta):
    expected = problem.expected.pop(np.asarray(beta).tobytes(), None)
    return expected if expected is not None else RowsAt(beta)


@expect_line_search.register
def _(problem: DistributedProblem, beta, direction, t: float, count: int) -> None:
    """After a rejected trial: the loss at every remaining trial point in one pass (a trial
    point costs one read of the rows on the workers but no round trip of its own)."""
    candidates = []
    for _ in range(count):
        candidates.append(line_search_candidate(problem, beta, t, direction))
        t *= 0.5
    losses = problem.partitions.losses(candidates, problem.tau, problem.bandwidth)
    problem.expected.clear()
    for candidate, loss in zip(candidates, losses, strict=True):
        handle = RowsAt(candidate)
        handle.sums["loss"] = loss
        problem.expected[candidate.tobytes()] = handle


@loss_sum.register
def _(problem: DistributedProblem, r):
    return _sum(problem, r, "loss")


@score_product.register
def _(problem: DistributedProblem, r, wide_sum: bool = True):
    score = _sum(problem, r, "score")  # float64, summed over the partitions in order
    return score if wide_sum else score.astype(problem.dtype)


@curvature_gram.register
def _(problem: DistributedProblem, r):
    return _sum(problem, r, "curvature")


@majoriser_gram.register
def _(problem: DistributedProblem, r):
    return _sum(problem, r, "majoriser")


@meat_gram.register
def _(problem: DistributedProblem, r):
    return _sum(problem, r, "meat")


@weighted_squared_norm.register
def _(problem: DistributedProblem) -> float:
    sums = problem.partitions.sums(problem.beta0, ("norm",), problem.tau, problem.bandwidth)
    return float(sums["norm"])
