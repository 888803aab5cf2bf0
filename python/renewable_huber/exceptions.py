"""The exception and warning hierarchy. Every error the package raises on purpose derives from
RenewableHuberError and every warning it issues from RenewableHuberWarning, so callers can
catch or filter one root."""

import os
import sys
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


class InputTypeError(ValidationError, TypeError):
    """A ValidationError for values of the wrong type (a dict or a list inside an object
    array), also a TypeError as NumPy's conversion error is."""


class BackendContractError(RenewableHuberError, TypeError):
    """An engine refuses an input for a transport reason (DLPack dtype, device, layout)."""


class EngineError(RenewableHuberError, RuntimeError):
    """A native engine failed for a reason other than invalid input (allocation, CUDA,
    cuBLAS/cuSOLVER, numerical, internal); the message carries the engine's status name and
    its last-error text. The committed state is unchanged."""


class InferenceUnavailableError(RenewableHuberError, RuntimeError):
    """Standard errors or intervals were asked for where the stream cannot give valid ones:
    an L1-penalised stream, a state restored without its meat matrix K (an older checkpoint
    or caller), a singular information matrix, or no more rows than parameters."""


# ---------------------------------------------------------------------------------- warnings


class RenewableHuberWarning(UserWarning):
    """Root of every warning issued by renewable_huber, so one filter covers them all."""


class TauScaleWarning(RenewableHuberWarning):
    """tau looks far too small for the target's scale (checked on the first batch of a
    stream, host arrays only): tau is an absolute threshold in the target's units. Not a
    ConvergenceWarning: the batch may well have converged."""


class FeatureScaleWarning(RenewableHuberWarning):
    """penalty="l1" on features far from standardised (checked on the first batch of a
    stream, host arrays only, standardize=False): the L1 solver is first-order and stops short
    of the optimum on such a design, possibly reporting convergence; fit with
    standardize=True."""


class PrecisionWarning(RenewableHuberWarning):
    """A float32 batch after a stream's first (penalty "none") solved a Newton system that is
    singular at float32 resolution (its linear solve's SVD rung ran): the float32 information
    matrix cannot resolve this design, and the batch may end far from the optimum even when it
    reports convergence (docs/python.md, "Float32 streams of raw-unit tables"). Stream in
    float64, or with standardize=True. Attribute: batch (1-based index in the stream)."""

    def __init__(self, message, *, batch=None):
        super().__init__(message)
        self.batch = batch


class ConvergenceWarning(RenewableHuberWarning):
    """A batch ended without converging. The batch was still folded into the stream (the
    state holds the last accepted step); diagnostics_ carries the reason.

    Attributes: batch (1-based index of the batch in the stream), iterations, and reason
    ("max_iter", "line search exhausted" or "LAMM attempts exhausted"). When scikit-learn is
    imported in the process, the warning issued is also a sklearn.exceptions.ConvergenceWarning
    (see sklearn_compatible)."""

    def __init__(self, message, *, batch=None, iterations=None, reason=None):
        super().__init__(message)
        self.batch = batch
        self.iterations = iterations
        self.reason = reason


class DataConversionWarning(RenewableHuberWarning):
    """An input was converted to the shape the estimator needs (a column-vector y to 1-D).
    Also scikit-learn's DataConversionWarning when scikit-learn is imported."""


# ------------------------------------------------------------------- scikit-learn's classes

_SKLEARN_NAMES = {
    NotFittedError: "NotFittedError",
    ConvergenceWarning: "ConvergenceWarning",
    DataConversionWarning: "DataConversionWarning",
}
_variants: dict[tuple[type, type], type] = {}
_variants_lock = threading.Lock()


def sklearn_compatible(cls: type) -> type:
    """The class to raise or warn with for `cls`: a subclass that also derives from
    scikit-learn's class of the same name when scikit-learn is already imported, else `cls`.

    Decision: scikit-learn is never imported for this (its import costs 2 to 3 s, the whole
    package about 0.5 s, and the base install is NumPy-only). Code that catches or filters
    scikit-learn's classes has imported scikit-learn, so looking it up in sys.modules at the
    moment of raising is enough: `except renewable_huber.NotFittedError` and
    `except sklearn.exceptions.NotFittedError` both work, and so do warning filters on either
    ConvergenceWarning."""
    sklearn_exceptions = sys.modules.get("sklearn.exceptions")
    theirs = getattr(sklearn_exceptions, _SKLEARN_NAMES[cls], None)
    if theirs is None:
        return cls
    key = (cls, theirs)
    with _variants_lock:
        variant = _variants.get(key)
        if variant is None:
            variant = type(cls.__name__, (cls, theirs), {"__module__": __name__,
                                                          "__doc__": cls.__doc__})
            _variants[key] = variant
    return variant


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def caller_stacklevel() -> int:
    """The warnings.warn stacklevel that points at the first frame outside this package, so
    a warning names the user's line however deep inside the package it was issued."""
    frame = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
        level += 1
    return level
