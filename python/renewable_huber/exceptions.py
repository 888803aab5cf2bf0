"""The exception hierarchy. Every error the package raises on purpose derives from
RenewableHuberError, so callers can catch one root."""


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
