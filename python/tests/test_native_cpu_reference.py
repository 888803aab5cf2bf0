"""native_cpu computes what the NumPy reference core computes, on randomised streams.

Tolerances (the cpu profile of conformance/README.md): float64 coefficients, information,
objective, lambda and bandwidth within rtol 2e-8 / atol 3e-9; float32 coefficients and
predictions within rtol 4e-4 of the float64 computation on the same data, plus the float32
flat-optimum radius (a float32 engine decides on float32 values, docs/decisions.md "Float32
oracle"). Iteration counts may differ near the stopping tolerance; differences are printed,
not hidden.
"""

from __future__ import annotations

import numpy as np
import pytest
from float32_checks import assert_float32_close, flat_radius, scaled_atol
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from renewable_huber import core
from renewable_huber.backends.native import NativeBackend
from renewable_huber.config import UpdateConfig
from renewable_huber.state import RenewableState

pytestmark = pytest.mark.usefixtures("cpu_library")


def make_stream(seed: int, p: int, batch_sizes: list[int], dtype, weights: bool):
    rng = np.random.default_rng(seed)
    beta = rng.normal(size=p)
    batches = []
    for n in batch_sizes:
        X = rng.normal(size=(n, p))
        noise = rng.standard_t(3, size=n)
        outliers = rng.random(n) < 0.05
        y = X @ beta + 0.5 + noise + 20.0 * outliers
        w = None
        if weights:
            w = rng.uniform(0.0, 2.0, size=n)
            w[rng.random(n) < 0.2] = 0.0
            if not w.any():
                w[0] = 1.0
            w = w.astype(dtype)
        batches.append((X.astype(dtype), y.astype(dtype), w))
    return batches


def run_reference(batches, config: UpdateConfig, dtype):
    state = RenewableState.empty(config.n_parameters, dtype)
    history = []
    for X, y, w in batches:
        X_design = core.design_matrix(np, X, config.fit_intercept)
        state, diagnostics = core.renewable_update(np, state, X_design, y, w, config)
        history.append((state, diagnostics))
    return history


def run_reference_from_states(batches, config: UpdateConfig, previous_states):
    """The float64 core's transition of every batch k from previous_states[k - 1] (cast to
    float64; the empty state for the first batch): per-transition answers for an engine whose
    own states are previous_states."""
    history = []
    state = RenewableState.empty(config.n_parameters, np.float64)
    for index, (X, y, w) in enumerate(batches):
        if index:
            previous = previous_states[index - 1]
            state = RenewableState(
                coefficients=np.asarray(previous.coefficients, dtype=np.float64),
                information=np.asarray(previous.information, dtype=np.float64),
                n_samples_seen=int(previous.n_samples_seen),
                batch_count=int(previous.batch_count),
                previous_lambda=float(previous.previous_lambda),
                weight_sum=float(previous.weight_sum),
            )
        X_design = core.design_matrix(np, X, config.fit_intercept)
        state, diagnostics = core.renewable_update(np, state, X_design, y, w, config)
        history.append((state, diagnostics))
    return history


def run_native(batches, config: UpdateConfig, dtype):
    backend = NativeBackend("native_cpu", dtype=dtype, n_parameters=config.n_parameters)
    try:
        history = [backend.update(X, y, w, config) for X, y, w in batches]
        predictions = backend.predict(batches[-1][0])
    finally:
        backend.close()
    return history, predictions


def _flat_optimum_checks(index, state, ref_state, batch, config, bandwidth, info_slack):
    """float64 coefficient and information checks for arbitrary random streams; returns the
    notes and the information slack carried to the next batch.

    Near the optimum the objective is flat: moving beta by d changes f by ~d' H d / 2, below
    float64 rounding of f once d ~ sqrt(eps / lambda_min(H)). The line search accepts on plain
    non-increase, so the last accepted step is a rounding-level decision and two correct
    engines may end that far apart with identical objectives (found by hypothesis: p=5, tau=3,
    1.2e-8 apart; p=61, tau=0.8, n=127, 2.1e-7 apart). The objective is held to rtol 2e-8 by
    the caller; coefficients get sqrt(eps cond(H)) (1 + ||beta||) as absolute slack. The
    information then differs only through rows whose curvature weight moved with their
    residual: |dc_i| <= |x_i . d| / (2h), so this batch adds at most
    sum_i w_i ||x_i||^2 |x_i . d| / (2h), on top of what earlier batches carried. Exceeding the
    strict golden tolerance is reported.
    """
    notes = []
    beta, ref_beta = state.coefficients, ref_state.coefficients
    np.testing.assert_allclose(
        beta, ref_beta, rtol=2e-8, atol=3e-9 + flat_radius(ref_state, config)
    )
    X, _, w = batch
    design = core.design_matrix(np, X, config.fit_intercept)
    weights = np.ones(design.shape[0]) if w is None else w
    moved = np.abs(design @ (beta - ref_beta)) / (2.0 * bandwidth)
    info_slack += float(np.sum(weights * np.sum(design**2, axis=1) * moved))
    gap = np.linalg.norm(state.information - ref_state.information)
    assert gap <= info_slack + 1e-10 * np.linalg.norm(ref_state.information)
    if not np.allclose(beta, ref_beta, rtol=2e-8, atol=3e-9) or not np.allclose(
        state.information, ref_state.information, rtol=2e-8, atol=3e-9
    ):
        notes.append(
            f"batch {index}: beyond rtol 2e-8/atol 3e-9 at a flat optimum (coefficients "
            f"{np.max(np.abs(beta - ref_beta)):.1e} apart, information relative "
            f"{gap / np.linalg.norm(ref_state.information):.1e})"
        )
    return notes, info_slack


def previous_state_objective_gap(native_previous, reference_previous, ref_state, config) -> float:
    """How far two engines' objectives for the same batch may differ only because each starts
    from its own previous state (beta0, J0), which earlier batches let differ within the
    flat-optimum gaps. f(beta) = [sum w rho(r) + delta' J0 delta / 2] / N - hist' delta with
    delta = beta - beta0, so with the reference's delta and the gaps dJ = J0' - J0,
    db = beta0' - beta0:
        |df| <= ||dJ|| ||delta||^2 / (2N) + ||J0 delta|| ||db|| / N + ||J0|| ||db||^2 / (2N)
    (the second term: d f / d beta0 = -J0 delta / N), plus, for L1, the historical
    subgradient (W0/N) lambda0 sign(beta0_j) where the signs of the two beta0 differ (an exact
    zero in one engine, a tiny value in the other): 2 (W0/N) lambda0 |delta_j| each. Seen
    without this: 6.2e-9 on an objective of 0.17 whose J0 differed by 3.7e-8 relative
    (p=39, tau 3, tol 1e-8), beyond the 1e-9 the stopping rule alone allows."""
    if native_previous is None or native_previous.n_samples_seen == 0:
        return 0.0
    J0 = reference_previous.information
    N = ref_state.weight_sum
    delta = ref_state.coefficients - reference_previous.coefficients
    d_beta0 = native_previous.coefficients - reference_previous.coefficients
    d_information = np.linalg.norm(native_previous.information - J0)
    gap = (
        0.5 * d_information * float(delta @ delta) / N
        + np.linalg.norm(J0 @ delta) * np.linalg.norm(d_beta0) / N
        + 0.5 * np.linalg.norm(J0) * float(d_beta0 @ d_beta0) / N
    )
    if config.penalty == "l1":
        flipped = np.sign(native_previous.coefficients) != np.sign(reference_previous.coefficients)
        if config.fit_intercept:
            flipped[-1] = False
        share = reference_previous.weight_sum / N * reference_previous.previous_lambda
        gap += 2.0 * share * float(np.sum(np.abs(delta[flipped])))
    return float(gap)


def compare(
    batches, config, dtype, native, reference, predictions, reference64=None, *, strict=False
):
    """reference: the NumPy core in the working dtype. reference64 (float32 streams only): the
    core in float64 on the same float32-valued data, the answer a float32 engine approximates.
    strict: hold float64 coefficients and information to the golden rtol 2e-8 / atol 3e-9
    (fixed streams known to end away from a rounding-level final step)."""
    notes = []
    info_slack = 0.0
    for index, ((state, diag), (ref_state, ref_diag)) in enumerate(
        zip(native, reference, strict=True)
    ):
        assert state.n_samples_seen == ref_state.n_samples_seen
        assert state.batch_count == ref_state.batch_count == index + 1
        np.testing.assert_allclose(state.weight_sum, ref_state.weight_sum, rtol=1e-12)
        if diag.iterations != ref_diag.iterations or diag.converged != ref_diag.converged:
            notes.append(
                f"batch {index}: native {diag.iterations} it (converged {diag.converged}), "
                f"reference {ref_diag.iterations} it (converged {ref_diag.converged})"
            )
        if dtype == np.float64:
            tolerance = dict(rtol=2e-8, atol=3e-9)
            if strict:
                np.testing.assert_allclose(state.coefficients, ref_state.coefficients, **tolerance)
                np.testing.assert_allclose(state.information, ref_state.information, **tolerance)
            else:
                batch_notes, info_slack = _flat_optimum_checks(
                    index, state, ref_state, batches[index], config, ref_diag.bandwidth,
                    info_slack,
                )
                notes += batch_notes
            # Both solvers converge linearly here (LAMM is first order; Newton's H uses the
            # smoothed curvature, a poor model when h is small), so two correct engines stop
            # where a step falls under tol and their objectives agree to about tol (seen: 1.2e-7
            # relative at p=218 L1; 2.4e-8 absolute on an objective of 0.0097 at tau 0.8).
            # Each engine's objective is also built on its OWN previous state, which the checks
            # above let differ by the flat-optimum gaps; previous_state_objective_gap bounds
            # what that moves f.
            objective_tolerance = (
                tolerance
                if strict
                else dict(
                    rtol=max(2e-8, config.tol),
                    atol=0.1 * config.tol
                    + previous_state_objective_gap(
                        native[index - 1][0] if index else None,
                        reference[index - 1][0] if index else None,
                        ref_state,
                        config,
                    ),
                )
            )
            np.testing.assert_allclose(diag.objective, ref_diag.objective, **objective_tolerance)
            np.testing.assert_allclose(diag.lambda_value, ref_diag.lambda_value, **tolerance)
            np.testing.assert_allclose(diag.bandwidth, ref_diag.bandwidth, **tolerance)
            np.testing.assert_allclose(
                state.previous_lambda, ref_state.previous_lambda, **tolerance
            )
            continue
        ref64_state = reference64[index][0]
        # Both float32 computations decide line searches, LAMM acceptance and steps on float32
        # values (the engine: candidates rounded to float, f assembled in float from double
        # reductions; the core: float32 throughout, residual rounding noise included), so near
        # the optimum both stop where float32 no longer resolves progress, up to
        # ~sqrt(eps32 cond(H)) (1 + ||beta||) from the float64 answer (seen: 5e-3 relative,
        # p=41 L1). Which side of that radius each lands on is a rounding decision, so the
        # engine is asserted against the float64 computation within the golden tolerance plus
        # the float32 radius, and the gap to the float32 core is reported.
        ref64_beta = ref64_state.coefficients
        assert_float32_close(
            state.coefficients, ref64_beta, "vs float64 core",
            slack=flat_radius(ref64_state, config, np.float32),
        )
        scale = max(1.0, float(np.max(np.abs(ref64_beta))))
        gap = np.max(np.abs(state.coefficients - ref64_beta))
        if gap > 4e-4 * scale:
            core_gap = np.max(np.abs(ref_state.coefficients - ref64_beta))
            notes.append(f"batch {index}: {gap:.2e} from the float64 core, the float32 core "
                         f"{core_gap:.2e} (scale {scale:.2f})")
        gap = np.max(np.abs(state.coefficients - ref_state.coefficients))
        if gap > 4e-4 * scale:
            notes.append(f"batch {index}: float32 core differs by {gap:.2e} (scale {scale:.2f})")
        # The information then differs through the rows whose curvature weight moved with their
        # residual, |dc_i| <= |x_i . d| / (2h) (d the coefficient gap), as in
        # _flat_optimum_checks, carried over the batches, plus float32 storage rounding.
        X, _, w = batches[index]
        design = core.design_matrix(np, X.astype(np.float64), config.fit_intercept)
        weights = np.ones(design.shape[0]) if w is None else w.astype(np.float64)
        moved = np.abs(design @ (state.coefficients - ref64_beta)) / (2.0 * ref_diag.bandwidth)
        info_slack += float(np.sum(weights * np.sum(design**2, axis=1) * moved))
        reference_norm = np.linalg.norm(ref64_state.information)
        gap = np.linalg.norm(state.information - ref64_state.information)
        assert gap <= info_slack + 1e-5 * reference_norm
        np.testing.assert_allclose(diag.bandwidth, ref_diag.bandwidth, rtol=1e-6)
        np.testing.assert_allclose(diag.lambda_value, ref_diag.lambda_value, rtol=1e-6)
    oracle = reference if dtype == np.float64 else reference64
    X_last = core.design_matrix(np, batches[-1][0].astype(np.float64), config.fit_intercept)
    expected = X_last @ oracle[-1][0].coefficients.astype(np.float64)
    if dtype == np.float64:
        radius = flat_radius(oracle[-1][0], config)
        slack = 0.0 if strict else radius * float(np.max(np.linalg.norm(X_last, axis=1)))
        np.testing.assert_allclose(predictions, expected, rtol=2e-8, atol=3e-9 + slack)
    else:
        slack = flat_radius(oracle[-1][0], config, np.float32) * float(
            np.max(np.linalg.norm(X_last, axis=1)))
        np.testing.assert_allclose(predictions, expected, rtol=4e-4,
                                   atol=scaled_atol(4e-4, expected) + slack)
    for line in notes:
        print(f"native_cpu vs reference ({np.dtype(dtype).name}, {config.penalty}): {line}")


def tolerances(dtype, penalty: str):
    # Both solvers converge linearly (H uses the smoothed curvature, LAMM is a proximal
    # gradient), so the stopping test compares a step with the tolerance. Near 1e-10 that step
    # is mostly rounding noise: two correct engines then stop one iteration apart (Newton) or
    # walk different, equally optimal paths (LAMM's acceptance test on rounding-level objective
    # differences), which moves float64 results by far more than rtol 2e-8. Tolerances the
    # solvers reach well above rounding keep both on the same iterates.
    if dtype == np.float32:
        return st.just(1e-5)
    return st.sampled_from([1e-6, 1e-8] if penalty == "none" else [1e-6])


@st.composite
def streams(draw):
    dtype = draw(st.sampled_from([np.float64, np.float32]))
    # float32 stays at p <= 60: wider float32 first batches start with most rows outside the
    # curvature zone, so H is ridge-dominated, falls below the float32 pivot floor and every
    # Newton step takes the SVD path in both engines, which is correct but slow.
    wide = st.integers(61, 300) if dtype == np.float64 else st.integers(30, 60)
    p = draw(st.one_of(st.integers(1, 6), st.integers(7, 60), wide))
    penalty = draw(st.sampled_from(["none", "l1"]))
    fit_intercept = draw(st.booleans())
    P = p + int(fit_intercept)
    # The first batch is tall enough for a well-posed problem; later ones may be tiny, the
    # information accumulated so far keeps them well-posed.
    sizes = [draw(st.integers(4 * P + 10, 4 * P + 60))]
    sizes += draw(st.lists(st.integers(1, 60), min_size=0, max_size=4))
    config = UpdateConfig(
        n_features_in=p,
        fit_intercept=fit_intercept,
        # tau below the noise scale with a narrow bandwidth makes the curvature nearly a step
        # function: Newton then converges linearly and the point where two correct engines
        # stop is a rounding decision far above the golden tolerance (hypothesis found many at
        # tau 0.8, bandwidth_scale 0.5). Random streams stay where the comparison is sharp;
        # the golden corpora and the strict fixed streams cover the rest.
        tau=draw(st.sampled_from([1.345, 3.0])),
        bandwidth_scale=draw(st.sampled_from([1.0, 2.0])),
        tol=draw(tolerances(dtype, penalty)),
        ridge=draw(st.sampled_from([0.0, 1e-8, 1e-4])),
        max_iter=100,
        penalty=penalty,
        lambda_scale=draw(st.sampled_from([0.1, 1.0])),
    )
    weights = draw(st.booleans())
    seed = draw(st.integers(0, 2**32 - 1))
    return dtype, config, make_stream(seed, p, sizes, dtype, weights)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(streams())
def test_native_cpu_matches_reference_on_random_streams(stream):
    """Float32 L1 streams are compared per transition: batch k's float64 answer starts from
    the engine's own state after batch k - 1 (run_reference_from_states), not from the float64
    core's. The renewable L1 objective carries the historical subgradient
    (W0/N) lambda0 sign(beta0), discontinuous where a previous coefficient is zero: a float32
    engine that ends a batch with a coefficient at 4.9e-4 where the float64 core has exactly 0
    (within the float32 tolerance) solves a next batch whose objective differs by ~lambda0 in
    that coordinate, and on a short next batch its minimiser moves by 0.15 to 0.45 (hypothesis
    found it; the native engine, the float32 core and the float64 core all met their own KKT
    conditions to 5e-4). A stream-level bound would have to cover that jump, which no rounding
    argument gives; the transition from the same state is what the engine must get right."""
    dtype, config, batches = stream
    try:
        reference = run_reference(batches, config, dtype)
    except np.linalg.LinAlgError:
        # Only the minimum-norm SVD step raises this (LAPACK gesdd not converging, seen on a
        # 266 x 266 singular Newton matrix: p=265, ridge 0, a first batch mostly beyond
        # tau + h; hypothesis seeds 2676 and 2383). That path is excluded below anyway; the
        # reference letting LinAlgError escape is a core bug, reported, not hidden: the
        # minimum-norm solve needs a fallback (gesvd, or eigh of the symmetric H).
        assume(False)
    # Once a rank-deficient Newton system takes the minimum-norm SVD step (typically a first
    # batch whose residuals at beta = 0 nearly all lie beyond tau + h, so H is ridge-sized),
    # which singular values fall under the cutoff decides the path, and the damped Newton may
    # stop at a point of the restricted step: two correct computations then part ways (seen:
    # objectives 1.85 vs 1.97, both "converged"). The fallback path is pinned where it is
    # deterministic: the C tests, the core tests and golden v1 case 4.
    assume(not any(d.used_regularized_fallback for _, d in reference))
    reference64 = None
    native, predictions = run_native(batches, config, dtype)
    if dtype == np.float32:
        as64 = [
            (X.astype(np.float64), y.astype(np.float64),
             None if w is None else w.astype(np.float64))
            for X, y, w in batches
        ]
        if config.penalty == "l1":
            reference64 = run_reference_from_states(as64, config, [s for s, _ in native])
        else:
            reference64 = run_reference(as64, config, np.float64)
        assume(not any(d.used_regularized_fallback for _, d in reference64))
    compare(batches, config, dtype, native, reference, predictions, reference64)


@pytest.mark.parametrize("penalty", ["none", "l1"])
def test_wide_design_p300_with_weights_matches_reference(penalty):
    dtype = np.float64
    config = UpdateConfig(
        n_features_in=300, fit_intercept=True, tau=1.345, bandwidth_scale=1.0,
        tol=1e-8 if penalty == "none" else 1e-6, ridge=1e-8, max_iter=100, penalty=penalty,
        lambda_scale=1.0,
    )
    batches = make_stream(7, 300, [700, 45, 3], dtype, weights=True)
    reference = run_reference(batches, config, dtype)
    native, predictions = run_native(batches, config, dtype)
    compare(batches, config, dtype, native, reference, predictions, strict=True)


@pytest.mark.parametrize("penalty", ["none", "l1"])
def test_float32_converges_below_float32_resolution(penalty):
    """tol 3e-8 asks for steps finer than float32 resolves near these coefficients. The engine
    decides on float32 values (docs/decisions.md "Float32 oracle") and must still converge,
    in about as many iterations as a core that converges on the same data, instead of running
    to max_iter on steps only double precision can see.

    Which core converges depends on the solver and, for the float32 core, on the BLAS kernel,
    so the yardstick is the fewest iterations of those that did (at least one must):
    - the float64 core converges with Newton, but its LAMM runs to max_iter at tol 3e-8 (its
      1e-12 acceptance margin lets steps settle near 1e-6, test_core_transition's L1_TOL);
    - the float32 core's LAMM converges: below float32 resolution phi doubles until the step
      rounds to zero. Its Newton does not always: it accepts a candidate on plain
      non-increase (f <= F), so on a float32 plateau where f rounds to one value it can accept
      a non-zero step of about one float32 ulp of beta (1.2e-7 here, above
      tol (1 + ||beta||) = 9.4e-8) forever. Batch 2 runs to max_iter with
      OPENBLAS_CORETYPE=Haswell and converges in 4 iterations with SkylakeX. That is an
      algorithm property of the reference (a fix: end the solve, as on a rejection, when an
      accepted step leaves f unchanged); it is printed, not asserted."""
    dtype = np.float32
    config = UpdateConfig(
        n_features_in=8, fit_intercept=True, tau=1.345, bandwidth_scale=1.0, tol=3e-8,
        ridge=1e-8, max_iter=1000, penalty=penalty, lambda_scale=1.0,
    )
    batches = make_stream(11, 8, [600, 300, 300], dtype, weights=False)
    reference = run_reference(batches, config, dtype)
    as64 = [(X.astype(np.float64), y.astype(np.float64), None) for X, y, _ in batches]
    reference64 = run_reference(as64, config, np.float64)
    native, predictions = run_native(batches, config, dtype)
    for index, ((_, diag), (_, ref_diag), (_, ref64_diag)) in enumerate(
        zip(native, reference, reference64, strict=True)
    ):
        yardstick = [d.iterations for d in (ref_diag, ref64_diag) if d.converged]
        assert yardstick, f"batch {index}: neither the float32 nor the float64 core converged"
        assert diag.converged and diag.iterations <= 3 * min(yardstick) + 10
        if not ref_diag.converged:
            print(f"float32 core, {penalty}, batch {index}: not converged after "
                  f"{ref_diag.iterations} iterations (plateau of equal float32 objectives)")
    compare(batches, config, dtype, native, reference, predictions, reference64)
