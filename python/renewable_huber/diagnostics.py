"""Diagnostics of one batch transition."""

from __future__ import annotations

import dataclasses


# init=False: the __init__ below does what the generated one of a frozen dataclass does, in one
# step instead of one object.__setattr__ call per field (~1.5 us per batch).
@dataclasses.dataclass(frozen=True, init=False)
class Diagnostics:
    iterations: int
    converged: bool
    objective: float
    lambda_value: float
    bandwidth: float
    used_regularized_fallback: bool = False

    def __init__(
        self,
        iterations: int,
        converged: bool,
        objective: float,
        lambda_value: float,
        bandwidth: float,
        used_regularized_fallback: bool = False,
    ):
        # Frozen: the fields are written once, here, straight into the instance dictionary.
        self.__dict__.update(
            iterations=iterations,
            converged=converged,
            objective=objective,
            lambda_value=lambda_value,
            bandwidth=bandwidth,
            used_regularized_fallback=used_regularized_fallback,
        )

    @classmethod
    def from_fields(cls, source) -> Diagnostics:
        """Plain Python values from anything with the six fields as attributes: an ABI
        RhCudaDiagnostics struct, or Diagnostics holding device scalars (CuPy)."""
        return cls(
            iterations=int(source.iterations),
            converged=bool(source.converged),
            objective=float(source.objective),
            lambda_value=float(source.lambda_value),
            bandwidth=float(source.bandwidth),
            used_regularized_fallback=bool(source.used_regularized_fallback),
        )

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


# Why a batch ended unconverged (docs/algorithm.md, "The reason a batch did not converge").
STOP_MAX_ITER = "max_iter"
STOP_LINE_SEARCH = "line search exhausted"
STOP_LAMM = "LAMM attempts exhausted"
STOP_REASONS = (STOP_MAX_ITER, STOP_LINE_SEARCH, STOP_LAMM)


def stop_reason(converged: bool, iterations: int, max_iter: int, penalty: str) -> str | None:
    """The one derivation of why a batch did not converge, from what every engine reports
    (converged, iterations) and the config: None when converged; "max_iter" when the solve
    used all max_iter iterations; otherwise the solver gave up early because no step it may
    try decreased the objective: "line search exhausted" (penalty "none", damped Newton) or
    "LAMM attempts exhausted" (penalty "l1")."""
    if converged:
        return None
    if iterations >= max_iter:
        return STOP_MAX_ITER
    return STOP_LAMM if penalty == "l1" else STOP_LINE_SEARCH


# What to do about an unconverged batch, by reason and penalty (the ConvergenceWarning's advice).
_RESCALE = "rescale the data or choose tau in the target's units (renewable_huber.suggest_tau)"
# LAMM is a first-order method: its iterations grow with the design's conditioning, and on real
# tables in raw units it is still far from the optimum after thousands of iterations
# (docs/python.md, "L1 fits need standardised features"). The CLI's summary says it too.
L1_SCALE_ADVICE = "the L1 solver is first-order and needs standardised features"
# What is left to do when an L1 batch of standardised features still stops (CLI's summary too).
COLLINEAR_REMEDY = "drop or combine nearly collinear columns"
_ADVICE = {
    (STOP_MAX_ITER, "none"): f"raise max_iter or loosen tol; otherwise {_RESCALE}",
    (STOP_MAX_ITER, "l1"): (
        f"{L1_SCALE_ADVICE}: fit with standardize=True (with tau in the target's units, e.g. "
        "tau='auto'), then raise max_iter if it still stops"
    ),
    # Already standardised: what is left is collinearity (docs/python.md) or too few iterations.
    (STOP_MAX_ITER, "l1", True): (
        "the features are standardised, so the design is nearly collinear or the batch needs "
        f"more iterations: raise max_iter, or {COLLINEAR_REMEDY}"
    ),
}


def stop_advice(reason: str, penalty: str, standardized: bool = False) -> str:
    """What a user can do about a batch that ended unconverged for `reason` (stop_reason),
    fitted with `penalty`, with or without standardize=True."""
    if standardized and (reason, penalty, True) in _ADVICE:
        return _ADVICE[reason, penalty, True]
    return _ADVICE.get((reason, penalty), _RESCALE)


class BatchDiagnostics(dict):
    """The last batch's diagnostics as the estimator's diagnostics_: a dict (mapping access,
    equality with a plain dict of the same items, JSON, pickle and copy all work as for a
    dict) whose fields can also be read as attributes, as renewable-huber 0.7.1 offered:
    ``model.diagnostics_.converged`` is ``model.diagnostics_["converged"]``.

    Fields: iterations, converged, objective, lambda_value, bandwidth,
    used_regularized_fallback, stop_reason (None when converged, else "max_iter",
    "line search exhausted" or "LAMM attempts exhausted").
    """

    # No instance dictionary: attributes are the items, and setting one is refused instead of
    # silently creating an attribute that the mapping would not show.
    __slots__ = ()

    def __getattr__(self, name: str):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(
                f"diagnostics have no field {name!r}; fields: {', '.join(self)}"
            ) from None

    @classmethod
    def from_batch(
        cls, diagnostics: Diagnostics, *, max_iter: int, penalty: str
    ) -> BatchDiagnostics:
        """Plain Python values of one batch's Diagnostics plus the derived stop_reason (the
        conversions of Diagnostics.from_fields, into the dict directly)."""
        iterations = int(diagnostics.iterations)
        converged = bool(diagnostics.converged)
        return cls(
            iterations=iterations,
            converged=converged,
            objective=float(diagnostics.objective),
            lambda_value=float(diagnostics.lambda_value),
            bandwidth=float(diagnostics.bandwidth),
            used_regularized_fallback=bool(diagnostics.used_regularized_fallback),
            stop_reason=stop_reason(converged, iterations, max_iter, penalty),
        )
