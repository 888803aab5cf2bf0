"""RenewableHuberRegressor: the scikit-learn-style face of the package.

The estimator owns validation and the fitted attributes; its backend owns the arithmetic
and the committed state. Every batch is transactional: the new attributes are computed into
locals and assigned together only after the backend committed, so a failure anywhere leaves
the estimator exactly as it was.
"""

from __future__ import annotations

import functools
import operator
import sys
import threading
import warnings
from typing import Any

import numpy as np

from . import checkpoint, inference
from . import tau as tau_guidance
from ._backend_facts import DEVICE_INPUT_BACKENDS, ENGINE_CHECKS_FINITE_BACKENDS
from ._feature_scaling import FeatureScaling, unstandardised_design
from ._validation import (
    DEFAULT_PARAMS,
    PARAM_NAMES,
    TAU_AUTO,
    Batch,
    ValidatedParams,
    check_predictions,
    explain_design_overflow,
    validate_batch,
    validate_params,
    validate_X,
)
from .backends import choose_backend, create_backend, unavailable_reason
from .config import UpdateConfig
from .dask.batch import is_dask_collection
from .diagnostics import BatchDiagnostics, Diagnostics, stop_advice
from .exceptions import (
    ConvergenceWarning,
    EngineError,
    FeatureScaleWarning,
    InferenceUnavailableError,
    NotFittedError,
    PrecisionWarning,
    RenewableHuberError,
    TauScaleWarning,
    ValidationError,
    caller_stacklevel,
    sklearn_compatible,
)
from .state import COUNTER_NAMES, RenewableState

# The constructor parameters as one tuple, in PARAM_NAMES order (one C-level call per batch).
_param_values = operator.attrgetter(*PARAM_NAMES)

_FITTED_ATTRIBUTES = (
    "coef_",
    "intercept_",
    "n_features_in_",
    "feature_names_in_",
    "n_samples_seen_",
    "n_iter_",
    "backend_",
    "device_",
    "n_jobs_",
    "diagnostics_",
    "cuda_features_",
    "tau_",
)


def _serialised(method):
    """Runs `method` holding the estimator's lock (see "Threads" in the class docstring)."""

    @functools.wraps(method)
    def locked(self, *args, **kwargs):
        lock = self.__dict__.get("_lock")
        if lock is None:  # an instance built without __init__ (e.g. object.__new__)
            lock = self.__dict__.setdefault("_lock", threading.RLock())
        with lock:
            return method(self, *args, **kwargs)

    return locked


class RenewableHuberRegressor:
    """Streaming robust (Huber) linear regression by renewable estimation.

    Each call to partial_fit folds one batch into a fixed-size state (coefficients and the
    P x P information matrix); the data itself is never kept (docs/algorithm.md).

    Batches must be exchangeable: each one a random sample of the same population (a
    shuffled table cut into batches). The renewable update carries the past through a
    quadratic expansion, so a table sorted by a covariate or by time with drifting
    relationships streams to a different answer than the full-data fit; shuffle the rows
    first.

    Parameters (keyword-only, validated at fit/partial_fit/load):
    tau > 0: Huber threshold, an absolute number in the TARGET'S UNITS (residuals beyond tau
    count linearly). The default 1.345 suits a target whose noise has unit scale
    (standardised data); in raw units use renewable_huber.suggest_tau(X, y) on a pilot batch
    or tau="auto", which fixes tau = suggest_tau(first batch) when a stream starts (tau_
    holds the number, get_params() keeps "auto", checkpoints store the number). A tau far
    below the first batch's residual spread gives a TauScaleWarning (first batch of a
    stream, host arrays only). penalty: "none" or "l1". lambda_scale >= 0: L1 strength
    multiplier. bandwidth_scale > 0: curvature smoothing multiplier. fit_intercept.
    max_iter >= 1, tol > 0: solver limits. ridge >= 0: added to the normalised Hessian.
    backend: "auto", "numpy", "cupy", "native_cpu", "native_cuda". device: "auto", "cpu",
    "cuda". dtype: "float32" or "float64". n_jobs: None, -1 or a positive thread count
    (native_cpu). cuda_graphs, cuda_fast_math (float32 only): native_cuda engine flags.
    inference (default False): accumulate the meat matrix K of the sandwich covariance, so
    that bse_, cov_params(), conf_int() and summary() work (penalty "none"). Off by default:
    K costs an extra Gram's worth of work per batch (docs/python.md, "Inference"); with
    inference=False no engine computes it and those methods raise
    InferenceUnavailableError. Fixed for the life of a stream, like dtype.
    standardize (default False): the engines fit the columns of X centred and scaled by the
    first batch's (weighted) mean and standard deviation, fixed for the life of the stream
    and kept in checkpoints (renewable_huber._feature_scaling); the L1 solver needs it on
    features in raw units (docs/python.md). coef_, intercept_, predict, cov_params() and the
    intervals are in raw units; state_ and checkpoints hold the standardised state; with
    penalty="l1" the penalty applies to the standardised coefficients (lambda times
    sum_j scale_j |coef_j|). The target is not transformed (tau stays in its units). Host
    arrays and Dask collections (their first batch is read once more for the column moments);
    device arrays are refused with standardize=True.

    Convergence: a batch that ends unconverged is still folded into the stream (the state
    holds the solver's last accepted step) and emits one renewable_huber.ConvergenceWarning
    naming the batch (its 1-based index in the stream), the iterations and the reason;
    diagnostics_ (a dict whose fields also read as attributes) carries iterations,
    converged, objective, lambda_value, bandwidth, used_regularized_fallback and
    stop_reason (None when converged, else "max_iter", "line search exhausted" or
    "LAMM attempts exhausted"). Turn the warning into an error with
    warnings.simplefilter("error", renewable_huber.ConvergenceWarning) to stop a stream at
    the first unconverged batch (the batch is then already committed: save() before each
    batch to keep a converged state, as `renewable-huber fit --strict` does).

    Input range: a batch to fit whose Gram X'WX or squared targets would overflow the working
    dtype is refused with a ValidationError naming the array and row, before any engine runs
    (the rule is in renewable_huber._validation); a prediction that overflows is refused too.

    Threads: calls on one estimator are serialised. fit, partial_fit, predict, score, save,
    state_dict, state_, reset, set_params and pickling take a per-estimator lock, so threads
    sharing one estimator never lose a batch or see a half-committed one (their batches fold
    in the order the lock is taken). Distinct estimators share nothing and run in parallel.

    After load(), n_iter_ is 0 and diagnostics_ is None until the next batch: a checkpoint
    stores the stream, not the last batch's solver trace. cuda_features_ (native_cuda only) is
    read from the engine when a batch commits: its graph counters are those right after the
    last committed batch (a failed batch changes no fitted attribute).
    """

    def __init__(
        self,
        *,
        tau=DEFAULT_PARAMS["tau"],
        penalty=DEFAULT_PARAMS["penalty"],
        lambda_scale=DEFAULT_PARAMS["lambda_scale"],
        bandwidth_scale=DEFAULT_PARAMS["bandwidth_scale"],
        fit_intercept=DEFAULT_PARAMS["fit_intercept"],
        max_iter=DEFAULT_PARAMS["max_iter"],
        tol=DEFAULT_PARAMS["tol"],
        ridge=DEFAULT_PARAMS["ridge"],
        backend=DEFAULT_PARAMS["backend"],
        device=DEFAULT_PARAMS["device"],
        dtype=DEFAULT_PARAMS["dtype"],
        n_jobs=DEFAULT_PARAMS["n_jobs"],
        cuda_graphs=DEFAULT_PARAMS["cuda_graphs"],
        cuda_fast_math=DEFAULT_PARAMS["cuda_fast_math"],
        inference=DEFAULT_PARAMS["inference"],
        standardize=DEFAULT_PARAMS["standardize"],
    ):
        self.tau = tau
        self.penalty = penalty
        self.lambda_scale = lambda_scale
        self.bandwidth_scale = bandwidth_scale
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.tol = tol
        self.ridge = ridge
        self.backend = backend
        self.device = device
        self.dtype = dtype
        self.n_jobs = n_jobs
        self.cuda_graphs = cuda_graphs
        self.cuda_fast_math = cuda_fast_math
        self.inference = inference
        self.standardize = standardize
        self._lock = threading.RLock()  # serialises calls (class docstring, "Threads")
        self._params_cache = None  # (parameter values, their ValidatedParams)
        self._config_cache = None  # (ValidatedParams, n_features, tau, UpdateConfig)
        self._clear_fit()

    # -- scikit-learn parameter protocol ------------------------------------------------

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor parameters, as stored (no estimator-valued parameters)."""
        return dict(zip(PARAM_NAMES, _param_values(self), strict=True))

    @_serialised
    def set_params(self, **params) -> RenewableHuberRegressor:
        """Set constructor parameters and reset the stream (a new stream starts next batch)."""
        unknown = sorted(set(params) - set(PARAM_NAMES))
        if unknown:
            raise ValidationError(
                f"invalid parameter(s) {unknown} for RenewableHuberRegressor; "
                f"valid parameters: {list(PARAM_NAMES)}"
            )
        for name, value in params.items():
            setattr(self, name, value)
        self.reset()
        return self

    def __repr__(self) -> str:
        changed = [
            f"{name}={getattr(self, name)!r}"
            for name in PARAM_NAMES
            if not _same_value(getattr(self, name), DEFAULT_PARAMS[name])
        ]
        return f"{type(self).__name__}({', '.join(changed)})"

    # Read by scikit-learn < 1.6 (is_regressor, scorers).
    _estimator_type = "regressor"

    def __sklearn_is_fitted__(self) -> bool:
        return self._backend is not None

    def __sklearn_tags__(self):
        # Only scikit-learn >= 1.6 calls this, so importing it here never adds a dependency.
        from sklearn.utils import InputTags, RegressorTags, Tags, TargetTags

        return Tags(
            estimator_type="regressor",
            target_tags=TargetTags(required=True),
            transformer_tags=None,
            classifier_tags=None,
            regressor_tags=RegressorTags(),
            input_tags=InputTags(allow_nan=False, sparse=False, two_d_array=True),
        )

    # -- fitting ------------------------------------------------------------------------

    @_serialised
    def fit(self, X, y, sample_weight=None) -> RenewableHuberRegressor:
        """Start a new stream with one batch (reset, then partial_fit, transactionally)."""
        self._learn(X, y, sample_weight, new_stream=True)
        return self

    @_serialised
    def partial_fit(self, X, y, sample_weight=None) -> RenewableHuberRegressor:
        """Fold one batch into the stream (the first batch starts it)."""
        self._learn(X, y, sample_weight, new_stream=self._backend is None)
        return self

    @_serialised
    def reset(self) -> RenewableHuberRegressor:
        """Forget the stream: the next batch starts from the empty state.

        The backend (for native engines: the engine and its device resources) is kept, loaded
        with the empty state here, and taken by the next fit or partial_fit whose stream
        layout and number of parameters still match; otherwise that batch creates a new one.
        """
        backend, layout = self._backend, self._stream_layout
        with_meat = getattr(self, "_inference", False)
        self._clear_fit()
        self._spare_backend = None
        if backend is not None:
            try:
                backend.restore(
                    RenewableState.empty(backend.n_parameters, backend.dtype, with_meat=with_meat)
                )
            except RenewableHuberError:
                return self  # a backend that cannot take the empty state is not reused
            self._spare_backend = (layout, backend)
        return self

    def _take_spare_backend(self, params: ValidatedParams, backend_name: str, n_parameters: int):
        """The backend reset() kept, holding the empty state, when it fits this new stream."""
        spare = getattr(self, "_spare_backend", None)
        self._spare_backend = None
        if spare is None:
            return None
        layout, backend = spare
        if (
            layout != params.stream_layout()
            or backend.name != backend_name
            or backend.n_parameters != n_parameters
        ):
            return None
        return backend

    def _clear_fit(self) -> None:
        attributes = self.__dict__
        for name in _FITTED_ATTRIBUTES:
            attributes.pop(name, None)
        self._backend = None
        self._state = None
        self._stream_layout = None
        self._feature_names = None
        self._inference = False  # the stream's inference setting (it is fixed per stream)
        self._scaling = None  # the stream's FeatureScaling with standardize=True

    def _validated_params(self) -> ValidatedParams:
        """validate_params(self.get_params()), reusing the last result while every parameter
        is still the very same immutable object (the check is a pure function of them), and
        for immutable values another estimator already validated (_validated_by_value). A new
        estimator built with the very objects of the last shared validation (cold streams made
        by the same code) takes that one without building a key by value."""
        values = _param_values(self)
        for cached in (getattr(self, "_params_cache", None), _last_validated_by_value):
            if cached is not None and all(map(operator.is_, cached[0], values)):
                self._params_cache = cached
                return cached[1]
        if all(map(_immutable_parameter, values)):
            params = _validated_by_value(values)
            self._params_cache = (values, params)
            return params
        self._params_cache = None
        return validate_params(dict(zip(PARAM_NAMES, values, strict=True)))

    def _learn(self, X, y, sample_weight, *, new_stream: bool) -> None:
        params = self._validated_params()
        if type(X) is not np.ndarray and is_dask_collection(X):
            self._learn_on_cluster(X, y, sample_weight, params, new_stream)
            return
        backend_name, n_features, feature_names = self._stream_so_far(params, new_stream)
        batch = validate_batch(
            X,
            y,
            sample_weight,
            dtype=params.dtype,
            accepts_device=backend_name in DEVICE_INPUT_BACKENDS,
            backend_name=backend_name,
            n_features_expected=n_features,
            feature_names_expected=feature_names,
            engine_checks_finite=backend_name in ENGINE_CHECKS_FINITE_BACKENDS,
            check_range=True,
        )
        n_features = int(batch.X.shape[1])
        scaling = None
        if params.standardize:
            _refuse_device_input(batch.on_device, "fit")
            scaling = (FeatureScaling.from_batch(batch.X, batch.sample_weight,
                                                 fit_intercept=params.fit_intercept)
                       if new_stream else self._scaling)
        # tau="auto" from the rows as given: the same number with or without standardize.
        tau = self._stream_tau(params, batch, new_stream)
        if scaling is not None:
            batch = batch._replace(X=scaling.transform(batch.X))
        config = self._update_config(params, n_features, tau)
        spare = None
        if new_stream:
            backend = spare = self._take_spare_backend(params, backend_name, config.n_parameters)
            if backend is None:
                # inference=False: the stream starts without K, so no engine computes it.
                backend = _new_backend(
                    params,
                    backend_name,
                    RenewableState.empty(
                        config.n_parameters, params.dtype, with_meat=params.inference
                    ),
                    available=True,  # _stream_so_far chose it
                )
            feature_names = batch.feature_names
        else:
            backend = self._backend
        try:
            state, diagnostics = backend.update(batch.X, batch.y, batch.sample_weight, config)
        except BaseException as error:
            if spare is not None:  # the update is transactional: it still holds the empty state
                self._spare_backend = (params.stream_layout(), spare)
            if isinstance(error, EngineError):
                try:
                    explain_design_overflow(batch.X, batch.y, batch.sample_weight)
                except ValidationError as explained:
                    raise explained from error
            raise
        self._commit(backend, state, diagnostics, params, n_features, feature_names, tau,
                     scaling)
        self._report(batch, params, tau, new_stream)

    def _learn_on_cluster(self, X, y, sample_weight, params: ValidatedParams, new_stream: bool):
        """One batch whose rows stay on a Dask cluster (renewable_huber.dask): the reference
        solvers run here on the partitions' sums; the backend then takes the new state, so
        predict and later in-memory batches continue the stream."""
        from .dask import prepare_batch

        backend_name, n_features, feature_names = self._stream_so_far(params, new_stream)
        with prepare_batch(
            X, y, sample_weight, dtype=params.dtype, fit_intercept=params.fit_intercept,
            n_features_expected=n_features, feature_names_expected=feature_names,
            backend=backend_name, standardize=params.standardize,
            scaling=None if new_stream else self._scaling,
        ) as batch:
            if params.tau != TAU_AUTO:
                tau = params.tau
            elif not new_stream:
                tau = self.tau_
            else:
                X, y, w = batch.pilot_rows()
                if batch.spec.scaling is not None:  # the rows as given, as in memory
                    X = X * batch.spec.scaling.scale + batch.spec.scaling.center
                tau = tau_guidance.tau_from_batch(X, y, w, fit_intercept=params.fit_intercept)
            config = self._update_config(params, batch.n_features, tau)
            previous = (
                RenewableState.empty(
                    config.n_parameters, params.dtype, with_meat=params.inference
                )
                if new_stream else self._state
            )
            state, diagnostics = batch.update(previous, config)
        if new_stream:
            backend = self._take_spare_backend(params, backend_name, config.n_parameters)
            if backend is None:
                backend = _new_backend(params, backend_name, state)
            else:
                backend.restore(state)
            feature_names = batch.feature_names
        else:
            backend = self._backend
            backend.restore(state)
        self._commit(backend, state, diagnostics, params, batch.n_features, feature_names, tau,
                     batch.spec.scaling)
        self._report(batch, params, tau, new_stream)

    def _stream_so_far(self, params: ValidatedParams, new_stream: bool):
        """(backend name, n_features_in_, feature names) a batch must match: the chosen backend
        and nothing yet for a new stream; the stream's own after checking it is unchanged."""
        if new_stream:
            backend_name, _ = choose_backend(params.backend, params.device)
            return backend_name, None, None
        self._check_same_stream(params)
        return self._backend.name, self.n_features_in_, self._feature_names

    def _stream_tau(self, params: ValidatedParams, batch: Batch, new_stream: bool) -> float:
        """The tau of this batch: the parameter, or with tau="auto" the number fixed when the
        stream started (suggest_tau on its first batch)."""
        if params.tau != TAU_AUTO:
            return params.tau
        if not new_stream:
            return self.tau_
        return tau_guidance.tau_from_batch(
            batch.X, batch.y, batch.sample_weight, fit_intercept=params.fit_intercept
        )

    def _report(self, batch: Batch, params: ValidatedParams, tau: float, new_stream: bool):
        """Warnings about the batch just committed (nothing here can change the state)."""
        diagnostics = self.diagnostics_
        if diagnostics["stop_reason"] is not None:
            number = int(self._state.batch_count)
            advice = stop_advice(diagnostics["stop_reason"], params.penalty, params.standardize)
            category = sklearn_compatible(ConvergenceWarning)
            warnings.warn(
                category(
                    f"batch {number} did not converge after {diagnostics['iterations']} "
                    f"iterations ({diagnostics['stop_reason']}); it was folded into the stream "
                    f"at the solver's last accepted step: {advice}",
                    batch=number,
                    iterations=diagnostics["iterations"],
                    reason=diagnostics["stop_reason"],
                ),
                stacklevel=caller_stacklevel(),
            )
        if (not new_stream and params.dtype == np.float32 and params.penalty == "none"
                and diagnostics["used_regularized_fallback"]):
            number = int(self._state.batch_count)
            warnings.warn(
                PrecisionWarning(
                    f"float32 batch {number} solved a Newton system singular at float32 "
                    "resolution (its linear solve fell back to the SVD): the float32 state "
                    "cannot resolve this design, and the batch may have stopped far from the "
                    "optimum even if it reports convergence; stream in float64, or with "
                    "standardize=True (docs/python.md, 'Float32 streams of raw-unit tables')",
                    batch=number,
                ),
                stacklevel=caller_stacklevel(),
            )
        if new_stream and params.tau != TAU_AUTO and not batch.on_device:
            self._check_tau_scale(batch, params, tau)
        if new_stream and params.penalty == "l1" and not params.standardize and not batch.on_device:
            reason = unstandardised_design(batch.X, batch.sample_weight,
                                           fit_intercept=params.fit_intercept)
            if reason is not None:
                warnings.warn(
                    FeatureScaleWarning(
                        f"penalty='l1' on features far from standardised: in the first batch, "
                        f"{reason}. The L1 solver is first-order and stops short of the "
                        "optimum on such a design, even when it reports convergence; fit with "
                        "standardize=True (docs/python.md, 'L1 fits need standardised "
                        "features')"
                    ),
                    stacklevel=caller_stacklevel(),
                )

    def _check_tau_scale(self, batch: Batch, params: ValidatedParams, tau: float) -> None:
        converged = self.diagnostics_["converged"]
        if (converged and batch.sample_weight is None
                and self.diagnostics_["objective"] < tau_guidance.QUIET_OBJECTIVE * tau * tau):
            return  # free: the first batch's mean loss rules the warning out (see tau.py)
        if converged:  # cheap: at most CHECK_ROWS rows at the fitted coefficients
            scale = tau_guidance.residual_scale_at(
                self._state.coefficients, batch.X, batch.y, batch.sample_weight,
                params.fit_intercept,
            )
            if not tau_guidance.tau_too_small(tau, scale):
                return
        # A pilot fit on at most PILOT_ROWS rows: only when the warning is likely, or when the
        # batch did not converge (its coefficients then say nothing about the noise).
        try:
            pilot = tau_guidance.pilot_scale(
                batch.X, batch.y, batch.sample_weight, fit_intercept=params.fit_intercept
            )
        except ValidationError:
            pilot = None
        if not converged:
            if pilot is None or not tau_guidance.tau_too_small(tau, pilot):
                return
            scale = pilot
        suggestion = None if pilot is None else tau_guidance.HUBER_EFFICIENCY_CONSTANT * pilot
        warnings.warn(
            TauScaleWarning(
                tau_guidance.tau_scale_message(tau, scale, suggestion, at_fit=converged)
            ),
            stacklevel=caller_stacklevel(),
        )

    def _update_config(self, params: ValidatedParams, n_features: int, tau: float):
        # The same UpdateConfig object while params, p and tau stay: a native backend then
        # reuses the ABI struct it built from it. The last one made in the process is tried
        # next: cold streams with the same settings (a new estimator each, sharing their
        # ValidatedParams through _validated_params) share one config, and one struct.
        global _last_config
        cached = getattr(self, "_config_cache", None)
        if not _config_of(cached, params, n_features, tau):
            cached = _last_config
            if not _config_of(cached, params, n_features, tau):
                config = UpdateConfig.from_settings(params, n_features, tau)
                cached = _last_config = (params, n_features, tau, config)
            self._config_cache = cached
        return cached[3]

    def _check_same_stream(self, params: ValidatedParams) -> None:
        if params.stream_layout() != self._stream_layout:
            raise ValidationError(
                "fit_intercept, dtype, backend, device, n_jobs, cuda_graphs, cuda_fast_math, "
                "inference or standardize changed since this stream started; call fit() or "
                "reset() to start a new stream"
            )

    def _commit(
        self,
        backend,
        state: RenewableState,
        diagnostics: Diagnostics | None,
        params: ValidatedParams,
        n_features: int,
        feature_names: tuple[str, ...] | None,
        tau: float,
        scaling: FeatureScaling | None,
    ) -> None:
        # Everything that can fail is computed before the first assignment.
        coefficients = state.coefficients
        dtype = coefficients.dtype
        if scaling is not None:
            coefficients = scaling.raw_parameters(coefficients, params.fit_intercept).astype(
                dtype
            )
        coef = np.array(coefficients[:n_features], copy=True)
        intercept = coefficients[n_features] if params.fit_intercept else dtype.type(0.0)
        cuda_features = backend.features if backend.name == "native_cuda" else None  # a fresh dict
        diagnostics_dict = (
            None
            if diagnostics is None
            else BatchDiagnostics.from_batch(
                diagnostics, max_iter=params.max_iter, penalty=params.penalty
            )
        )
        n_iter = 0 if diagnostics is None else diagnostics_dict["iterations"]
        names_array = None if feature_names is None else np.array(feature_names, dtype=object)

        # What _clear_fit() followed by one assignment per attribute leaves, in one update:
        # every fitted attribute is replaced, and the two that only some streams have are
        # removed when this one has none.
        attributes = self.__dict__
        attributes.update(
            _backend=backend,
            _state=state,
            _stream_layout=params.stream_layout(),
            _inference=params.inference,
            _scaling=scaling,
            _feature_names=feature_names,
            coef_=coef,
            intercept_=intercept,
            n_features_in_=n_features,
            n_samples_seen_=int(state.n_samples_seen),
            n_iter_=n_iter,
            backend_=backend.name,
            device_=backend.device,
            n_jobs_=backend.n_jobs,
            diagnostics_=diagnostics_dict,
            tau_=float(tau),
        )
        for name, value in (("feature_names_in_", names_array),
                            ("cuda_features_", cuda_features)):
            if value is None:
                attributes.pop(name, None)
            else:
                attributes[name] = value

    # -- prediction ---------------------------------------------------------------------

    def _require_fitted(self) -> None:
        if self._backend is None:
            raise sklearn_compatible(NotFittedError)(
                f"this {type(self).__name__} is not fitted yet; call fit or partial_fit first"
            )

    @_serialised
    def predict(self, X):
        """Predictions (n,): NumPy for host input, the caller's array type for device input."""
        self._require_fitted()
        X, _, _ = validate_X(
            X,
            dtype=self._state.coefficients.dtype,
            accepts_device=self._backend.name in DEVICE_INPUT_BACKENDS,
            backend_name=self._backend.name,
            n_features_expected=self.n_features_in_,
            feature_names_expected=self._feature_names,
        )
        X = self._standardised(X, "predict")
        # An overflow is refused below, naming the row, so NumPy's RuntimeWarning is noise.
        with np.errstate(over="ignore", invalid="ignore"):
            predictions = self._backend.predict(X)
        return check_predictions(predictions)

    @_serialised
    def score(self, X, y, sample_weight=None) -> float:
        """Coefficient of determination R^2 (weighted when sample_weight is given)."""
        self._require_fitted()
        batch = validate_batch(
            X,
            y,
            sample_weight,
            dtype=self._state.coefficients.dtype,
            accepts_device=self._backend.name in DEVICE_INPUT_BACKENDS,
            backend_name=self._backend.name,
            n_features_expected=self.n_features_in_,
            feature_names_expected=self._feature_names,
        )
        with np.errstate(over="ignore", invalid="ignore"):
            predictions = self._backend.predict(self._standardised(batch.X, "score"))
        predictions = _to_host(check_predictions(predictions)).astype(np.float64)
        target = _to_host(batch.y).astype(np.float64)
        weights = (
            np.ones_like(target)
            if batch.sample_weight is None
            else _to_host(batch.sample_weight).astype(np.float64)
        )
        residual = np.sum(weights * (target - predictions) ** 2)
        mean = np.sum(weights * target) / np.sum(weights)
        total = np.sum(weights * (target - mean) ** 2)
        if total == 0.0:
            # Constant target: perfect predictions score 1, anything else 0 (as scikit-learn).
            return 1.0 if residual == 0.0 else 0.0
        return float(1.0 - residual / total)

    def _standardised(self, X, method: str):
        """X as the engine sees it: (X - center) / scale with standardize=True."""
        if self._scaling is None:
            return X
        _refuse_device_input(not isinstance(X, np.ndarray), method)
        return self._scaling.transform(X)

    # -- inference ----------------------------------------------------------------------

    def _covariance(self) -> np.ndarray:
        self._require_fitted()
        if self._validated_params().penalty != "none":
            raise InferenceUnavailableError(
                "standard errors and intervals are offered for penalty='none' only: after L1 "
                "selection the usual intervals are not valid (they ignore the selection step); "
                "refit the selected features with penalty='none' on fresh data for inference"
            )
        if not getattr(self, "_inference", False):
            raise InferenceUnavailableError(inference.NOT_REQUESTED)
        covariance = inference.sandwich_covariance(self._state)
        if self._scaling is None:
            return covariance
        A = self._scaling.jacobian(self._has_intercept())
        covariance = A @ covariance @ A.T
        return 0.5 * (covariance + covariance.T)

    def _has_intercept(self) -> bool:
        return self._state.n_parameters > self.n_features_in_

    def _parameters(self) -> np.ndarray:
        """coef_ then intercept_ (when fitted), float64, in the order of cov_params(): the
        raw-unit parameters the intervals, the summary and the command line report."""
        parameters = np.asarray(self.coef_, dtype=np.float64)
        if self._has_intercept():
            parameters = np.append(parameters, np.float64(self.intercept_))
        return parameters

    @_serialised
    def cov_params(self) -> np.ndarray:
        """(P, P) float64 covariance of the coefficients, rows and columns in the order of
        coef_ then the intercept last: n/(n - P) J^-1 K J^-1 (docs/algorithm.md,
        "Inference"). InferenceUnavailableError for a model fitted with inference=False (the
        default), L1, a stream without K (e.g. loaded from a checkpoint of format 3 or older),
        a singular J, or n <= P."""
        return self._covariance()

    @property
    @_serialised
    def bse_(self) -> np.ndarray:
        """(P,) float64 standard errors, in the order of coef_ then the intercept last."""
        return np.sqrt(np.diagonal(self._covariance())).copy()

    @_serialised
    def conf_int(self, alpha=0.05) -> np.ndarray:
        """(P, 2) float64 Wald intervals [lower, upper] at level 1 - alpha, rows in the order
        of coef_ then the intercept last."""
        alpha = inference.check_alpha(alpha)
        standard_errors = np.sqrt(np.diagonal(self._covariance()))
        return inference.confidence_intervals(self._parameters(), standard_errors, alpha)

    @_serialised
    def summary(self, alpha=0.05, *, as_dict: bool = False):
        """A table of coef, std err, z, P>|z| and the 1 - alpha interval per coefficient
        (feature names, or x0, x1, ..., then "intercept"); as_dict=True gives the rows as a
        list of dicts with keys name, coef, std_err, z, p_value, lower, upper."""
        alpha = inference.check_alpha(alpha)
        standard_errors = np.sqrt(np.diagonal(self._covariance()))
        rows = inference.summary_rows(
            self._coefficient_names(), self._parameters(), standard_errors, alpha
        )
        if as_dict:
            return rows
        header = (
            f"RenewableHuberRegressor: {self.n_samples_seen_} rows in "
            f"{self._state.batch_count} batches, tau={self.tau_:g}"
        )
        return inference.format_summary(rows, alpha, header)

    def _coefficient_names(self) -> list[str]:
        if self._feature_names is not None:
            names = [str(name) for name in self._feature_names]
        else:
            names = [f"x{j}" for j in range(self.n_features_in_)]
        if self._has_intercept():
            names.append("intercept")
        return names

    # -- state and checkpoints ----------------------------------------------------------

    @property
    @_serialised
    def state_(self) -> RenewableState:
        """A defensive copy of the committed state."""
        self._require_fitted()
        return self._state.copy()

    @_serialised
    def state_dict(self) -> dict[str, Any]:
        """Everything a checkpoint stores (arrays copied; JSON-ready metadata)."""
        self._require_fitted()
        state = self._state
        params = validate_params(self.get_params())
        config = params.as_config_dict()
        # tau="auto" is stored as the number the stream uses, so a resumed stream keeps it.
        config["tau"] = float(self.tau_)
        # The stream's setting, which decided whether its state carries K.
        config["inference"] = bool(self._inference)
        return {
            "format_version": checkpoint.FORMAT_VERSION,
            "config": config,
            "coefficients": np.array(state.coefficients, copy=True),
            "information": np.array(state.information, copy=True),
            "n_samples_seen": int(state.n_samples_seen),
            "batch_count": int(state.batch_count),
            "previous_lambda": float(state.previous_lambda),
            "n_features_in": int(self.n_features_in_),
            "fit_intercept": bool(params.fit_intercept),
            "weight_sum": float(state.weight_sum),
            "feature_names_in": None if self._feature_names is None else list(self._feature_names),
            "meat": None if state.meat is None else np.array(state.meat, copy=True),
            "feature_scaling": None if self._scaling is None else self._scaling.as_record(),
        }

    # -- pickle, copy.deepcopy, joblib ---------------------------------------------------

    @_serialised
    def __getstate__(self) -> dict[str, Any]:
        """The parameters and, once fitted, the committed state as a checkpoint payload plus
        the last batch's diagnostics: never the engine handle (ctypes pointers, device memory
        and threads belong to one process)."""
        fitted = self._backend is not None
        return {
            "params": self.get_params(),
            "payload": self.state_dict() if fitted else None,
            "backend_": self.backend_ if fitted else None,
            "extras": {
                name: getattr(self, name)
                for name in ("n_iter_", "diagnostics_")
                if fitted and hasattr(self, name)
            },
        }

    def __setstate__(self, pickled: dict[str, Any]) -> None:
        """A new engine of the recorded backend restores the state bit for bit (a native
        engine is created in this process); with backend="auto" and that engine unavailable
        here, auto chooses again, as it does for a new stream."""
        params = dict(pickled["params"])
        payload = pickled["payload"]
        if "inference" not in params:
            # pickled before the parameter existed: those streams carried K when they could
            params["inference"] = payload is not None and payload.get("meat") is not None
        self.__init__(**params)
        if payload is None:
            return
        params = self._validated_params()
        backend_name = pickled["backend_"]
        if params.backend == "auto" and unavailable_reason(backend_name) is not None:
            backend_name, _ = choose_backend(params.backend, params.device)
        state = _state_from_payload(payload, params.dtype)
        names = payload["feature_names_in"]
        self._commit(
            _new_backend(params, backend_name, state),
            state,
            None,
            params,
            payload["n_features_in"],
            None if names is None else tuple(names),
            payload["config"]["tau"],
            _scaling_from_payload(payload, state),
        )
        for name, value in pickled["extras"].items():
            setattr(self, name, value)

    @_serialised
    def save(self, path) -> None:
        """Write a pickle-free checkpoint atomically (see renewable_huber.checkpoint)."""
        checkpoint.save_checkpoint(path, self.state_dict())

    @classmethod
    def load(cls, path, *, backend=None, device=None, dtype=None) -> RenewableHuberRegressor:
        """Resume a stream from a checkpoint, optionally on another backend/device/dtype.

        Overriding backend alone resets device to "auto" (the saved device may not suit the
        new backend); the state is cast once when dtype changes.
        """
        return cls._from_payload(checkpoint.load_checkpoint(path), backend=backend,
                                           device=device, dtype=dtype, where=str(path))

    @classmethod
    def _from_payload(cls, payload: dict[str, Any], *, backend=None, device=None,
                                dtype=None, where: str = "checkpoint") -> RenewableHuberRegressor:
        """load() of a payload that checkpoint.load_checkpoint returned (the command line's
        inspect restores one on the NumPy backend); `where` names it in errors."""
        config = dict(payload["config"])
        if isinstance(config["tau"], str):
            raise ValidationError(
                f"{where}: the checkpoint's config has tau={config['tau']!r}; a checkpoint "
                "stores the number its stream uses"
            )
        if backend is not None:
            config["backend"] = backend
            config["device"] = "auto"
        if device is not None:
            config["device"] = device
        if dtype is not None:
            config["dtype"] = dtype
        estimator = cls(**config)
        params = validate_params(estimator.get_params())
        backend_name, _ = choose_backend(params.backend, params.device)
        state = _state_from_payload(payload, params.dtype)
        engine = _new_backend(params, backend_name, state, available=True)
        names = payload["feature_names_in"]
        estimator._commit(
            engine,
            state,
            None,
            params,
            payload["n_features_in"],
            None if names is None else tuple(names),
            params.tau,
            _scaling_from_payload(payload, state),
        )
        return estimator


def _new_backend(params: ValidatedParams, backend_name: str, state: RenewableState, *,
                 available: bool = False):
    """A new backend for `params`, holding `state`. available=True: choose_backend has just
    returned `backend_name` in this call, so its availability is not asked again."""
    backend = create_backend(
        backend_name,
        dtype=params.dtype,
        n_parameters=state.n_parameters,
        n_jobs=params.n_jobs,
        cuda_graphs=params.cuda_graphs,
        cuda_fast_math=params.cuda_fast_math,
        available=available,
    )
    backend.restore(state)
    return backend


def _state_from_payload(payload: dict[str, Any], dtype: np.dtype) -> RenewableState:
    with np.errstate(over="ignore"):
        coefficients = np.array(payload["coefficients"], dtype=dtype, copy=True)
        information = np.array(payload["information"], dtype=dtype, copy=True)
    if not (np.isfinite(coefficients).all() and np.isfinite(information).all()):
        raise ValidationError(
            f"the checkpoint's state overflows {dtype.name}; load it with dtype='float64'"
        )
    return RenewableState(
        coefficients,
        information,
        *(payload[name] for name in COUNTER_NAMES),
        meat=None if payload.get("meat") is None else np.array(
            payload["meat"], dtype=np.float64, copy=True
        ),
    )


def _scaling_from_payload(payload: dict[str, Any], state: RenewableState) -> FeatureScaling | None:
    """The payload's feature scaling, checked against the state it scales: its numbers and the
    raw-unit coefficients they give must be finite in the state's dtype."""
    record = payload.get("feature_scaling")
    if record is None:
        return None
    fit_intercept = payload["fit_intercept"]
    scaling = FeatureScaling.from_record(record, payload["n_features_in"], fit_intercept)
    dtype = state.coefficients.dtype
    limits = np.finfo(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        raw = scaling.raw_parameters(state.coefficients, fit_intercept).astype(dtype)
    if not (np.all(scaling.scale >= limits.tiny) and np.all(scaling.scale <= limits.max)
            and np.all(np.abs(scaling.center) <= limits.max) and np.isfinite(raw).all()):
        raise ValidationError(
            f"the checkpoint's feature scaling, or the coefficients it gives in raw units, "
            f"do not fit {dtype.name}"
            + ("; load it with dtype='float64'" if dtype != np.float64 else "")
        )
    return scaling


def _refuse_device_input(on_device: bool, method: str) -> None:
    if on_device:
        raise ValidationError(
            f"standardize=True takes host arrays: {method} got a device array, which the "
            "estimator does not standardise; pass a NumPy array, or standardise on the device "
            "yourself and use standardize=False"
        )


def _to_host(array) -> np.ndarray:
    if isinstance(array, np.ndarray):
        return array
    library = sys.modules[type(array).__module__.split(".")[0]]
    if hasattr(library, "asnumpy"):
        return library.asnumpy(array)
    return np.asarray(array.detach().cpu())


# Parameter values that cannot change while the estimator holds them; a parameter of any other
# type (e.g. a float subclass with its own __float__) is validated again at every batch.
_IMMUTABLE_TYPES = (bool, int, float, str, type(None))


def _immutable_parameter(value) -> bool:
    if type(value) in _IMMUTABLE_TYPES:
        return True
    if isinstance(value, (np.generic, np.dtype)) and type(value).__module__.startswith("numpy"):
        return True
    return value is np.float32 or value is np.float64


# ValidatedParams by parameter values, shared by every estimator in the process: a new
# estimator per stream (a cold stream) validates its parameters once per process, not once
# per stream. Only immutable values (_immutable_parameter) are keys. Each is keyed with its
# exact type, so True, 1 and 1.0 stay apart, and floats by their bits, so 0.0 and -0.0 do too;
# values that fail validation are never stored. Bounded: past the limit, validated each time.
_VALIDATED_BY_VALUE: dict[tuple, ValidatedParams] = {}
_VALIDATED_BY_VALUE_LIMIT = 256
_FLOAT_TYPES = (float, np.float64, np.float32, np.float16)


def _value_key(value):
    if type(value) in _FLOAT_TYPES:
        return type(value), float(value).hex()
    return type(value), value


# (values, ValidatedParams) of the last lookup of _validated_by_value that found or stored
# its values in _VALIDATED_BY_VALUE: a tuple holding its values (so their identities stay
# theirs), replaced whole, which is atomic for a reader in another thread.
_last_validated_by_value: tuple[tuple, ValidatedParams] | None = None


def _validated_by_value(values: tuple) -> ValidatedParams:
    global _last_validated_by_value
    key = tuple(map(_value_key, values))
    params = _VALIDATED_BY_VALUE.get(key)
    if params is None:
        params = validate_params(dict(zip(PARAM_NAMES, values, strict=True)))
        if len(_VALIDATED_BY_VALUE) >= _VALIDATED_BY_VALUE_LIMIT:
            return params  # not kept, so validated again next time, by any estimator
        _VALIDATED_BY_VALUE[key] = params
    _last_validated_by_value = (values, params)
    return params


# (ValidatedParams, n_features, tau, UpdateConfig) of the last config _update_config made, in
# any estimator; a tuple replaced whole (atomic for a reader in another thread).
_last_config: tuple[ValidatedParams, int, float, UpdateConfig] | None = None


def _config_of(cached, params: ValidatedParams, n_features: int, tau: float) -> bool:
    """Whether `cached`, an entry of _update_config's caches or None, is the config of
    `params` (that very object: validated parameters are immutable), p and tau."""
    return (
        cached is not None
        and cached[0] is params
        and cached[1] == n_features
        and cached[2] == tau
    )


def _same_value(value, default) -> bool:
    return type(value) is type(default) and value == default
