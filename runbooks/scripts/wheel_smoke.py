"""Smoke test of an installed wheel: imports from site-packages (never the checkout), fits
with every engine this host has, and checks the engines agree with the NumPy reference.

    python wheel_smoke.py [--require native_cpu,native_cuda]

--require lists the engines that must load (default: both, as on the GPU host); any other
engine that is unavailable is reported and skipped."""

import argparse
import sys

import numpy as np

import renewable_huber
from renewable_huber.backends import unavailable_reason

parser = argparse.ArgumentParser(description="smoke test of an installed wheel")
parser.add_argument("--require", default="native_cpu,native_cuda",
                    help="comma-separated engines that must be available")
required = set(filter(None, parser.parse_args().require.split(",")))
if "site-packages" not in renewable_huber.__file__:
    sys.exit(f"imported {renewable_huber.__file__}, not the installed wheel")
rng = np.random.default_rng(0)
X = rng.standard_normal((5_000, 6))
# Heavy-tailed noise and gross outliers, so rows sit in every curvature zone of the Huber loss.
y = X @ np.arange(1.0, 7.0) + 0.5 + rng.standard_t(3, 5_000)
y[::50] += 25.0
reference = renewable_huber.RenewableHuberRegressor(backend="numpy").fit(X, y).coef_
for backend in ("native_cpu", "cupy", "native_cuda"):
    reason = unavailable_reason(backend)
    if reason is not None:
        if backend in required:
            sys.exit(f"{backend} unavailable: {reason}")
        print(f"{backend}: unavailable ({reason})")
        continue
    device = {"device": "cuda"} if backend in ("cupy", "native_cuda") else {}
    model = renewable_huber.RenewableHuberRegressor(backend=backend, **device).fit(X, y)
    if model.backend_ != backend:
        sys.exit(f"asked for {backend}, the estimator ran {model.backend_}")
    coef = model.coef_
    error = float(np.max(np.abs(coef - reference)))
    print(f"{backend}: max |coef - numpy| = {error:.2e}")
    if error > 1e-8:
        sys.exit(f"{backend} disagrees with the NumPy reference by {error}")
print(f"wheel smoke test passed ({renewable_huber.__file__})")
