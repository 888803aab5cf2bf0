"""The exception and warning hierarchy. Every error the package raises on purpose derives from
RenewableHuberError and every warning it issues from RenewableHuberWarning, so callers can
catch or filter one root."""

import threading


class RenewableHuberError(Exception):
    """Root of every error raised by renewable_huber."""


class NotFittedError(RenewableHuberError, AttributeError):
    """The estimator has seen no batch yet (predict, score, save, state_dict before a fit)."""


class BackendUnavailableError(RenewableHuberError, RuntimeError):
    """A backend cannot be used here: missing engine library or CuPy, no GPU, ABI version
    mismatch, or an unknown backend name."""


class ValidationError(RenewableHuberError, ValueError):
    """A configuration, input, state or checkpoint violates the documented rules."""


class BackendContractError(RenewableHuberError, TypeError):
    """An engine refuses an input for a transport reason (DLPack dtype, device, layout)."""


class EngineError(RenewableHuberError, RuntimeError):
    """A native engine failed for a reason other than invalid input (allocation, CUDA,
    cuBLAS/cuSOLVER, numerical, internal); the message carries the engine's status name and
    its last-error text. The committed state is unchanged."""


# ---------------------------------------------------------------------------------- warnings


class RenewableHuberWarning(UserWarning):
    """Root of every warning issued by renewable_huber, so one filter covers them all."""


class TauScaleWarning(RenewableHuberWarning):
    """tau looks far too small for the target's scale (checked on the first batch of a
    stream, host arrays only): tau is an absolute threshold in the target's units. Not a
    ConvergenceWarning: the batch may well have converged."""


_SKLEARN_DECISION = """\
Decision: when scikit-learn is importable, the class also derives from
sklearn.exceptions.ConvergenceWarning, so a user's
warnings.filterwarnings(..., category=sklearn.exceptions.ConvergenceWarning) covers this
package too. Importing sklearn.exceptions imports scikit-learn itself (and SciPy), measured at
2 to 3 s against about 0.5 s for this whole package, so it is not done when renewable_huber is
imported: the class is created (and scikit-learn imported) the first time it is needed, that
is when code names renewable_huber.ConvergenceWarning or when the first unconverged batch is
reported. The base install stays NumPy-only: without scikit-learn (or with one that fails to
import) the class derives from RenewableHuberWarning alone. Once created, its identity and
bases never change, whatever is imported later.
"""


def _make_convergence_warning() -> type:
    """Build ConvergenceWarning once, on first use (see _SKLEARN_DECISION)."""
    bases: tuple[type, ...] = (RenewableHuberWarning,)
    try:
        from sklearn.exceptions import ConvergenceWarning as SklearnConvergenceWarning
    except Exception:  # not installed, or an install that fails to import: stay NumPy-only
        SklearnConvergenceWarning = None
    if SklearnConvergenceWarning is not None and issubclass(SklearnConvergenceWarning, Warning):
        bases = (RenewableHuberWarning, SklearnConvergenceWarning)

    def __init__(self, message, *, batch=None, iterations=None, reason=None):
        RenewableHuberWarning.__init__(self, message)
        self.batch = batch
        self.iterations = iterations
        self.reason = reason

    namespace = {
        "__doc__": (
            "A batch ended without converging. The batch was still folded into the stream "
            "(the state holds the last accepted step); diagnostics_ carries the reason.\n\n"
            "Attributes: batch (1-based index of the batch in the stream), iterations, and "
            "reason (\"max_iter\", \"line search exhausted\" or \"LAMM attempts exhausted\").\n\n"
            + _SKLEARN_DECISION
        ),
        "__module__": __name__,
        "__qualname__": "ConvergenceWarning",
        "__init__": __init__,
    }
    return type("ConvergenceWarning", bases, namespace)


_convergence_warning: type | None = None
# Two threads reporting their first unconverged batch at once must still create one class.
_convergence_warning_lock = threading.Lock()


def convergence_warning_class() -> type:
    """renewable_huber.ConvergenceWarning (created on the first call, see its docstring)."""
    global _convergence_warning
    if _convergence_warning is None:
        with _convergence_warning_lock:
            if _convergence_warning is None:
                _convergence_warning = _make_convergence_warning()
    return _convergence_warning


def is_convergence_warning(warning) -> bool:
    """Whether `warning` is a ConvergenceWarning of this package, without creating the class
    (and so without importing scikit-learn) when none was ever issued."""
    return _convergence_warning is not None and isinstance(warning, _convergence_warning)


def __getattr__(name: str):
    # Module attribute access (PEP 562): `from renewable_huber.exceptions import
    # ConvergenceWarning` and pickle's lookup of the class both land here.
    if name == "ConvergenceWarning":
        return convergence_warning_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), "ConvergenceWarning"])
