"""Where the Python side of a device-input partial_fit on native_cuda goes: per-call times of
its pieces (the DLPack export with and without the engine's stream, one borrow, the validation),
of the CuPy stream-ordering calls a borrow implies, and a cProfile of partial_fit.

    RH_CUDA_LIBRARY=build/.../librh_cuda.so PYTHONPATH=python \
        python3 benchmarks/micro/device_input_pieces.py [--rows 256 --features 32]

Needs CuPy and a usable librh_cuda. The model is warmed up on one float64 batch, so every timed
partial_fit is a converged update of the same size (one Newton iteration). Compare
python_overhead.py, which times partial_fit against the bare engine call. A script, not a test:
nothing is asserted.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time
import warnings

import numpy as np

from renewable_huber import RenewableHuberRegressor
from renewable_huber._validation import validate_batch


def per_call(label: str, function, calls: int) -> None:
    for _ in range(200):
        function()
    began = time.perf_counter_ns()
    for _ in range(calls):
        function()
    print(f"{label:48s} {(time.perf_counter_ns() - began) / calls / 1e3:8.2f} us", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--features", type=int, default=32)
    parser.add_argument("--calls", type=int, default=20_000)
    args = parser.parse_args()
    import cupy as cp

    rng = np.random.default_rng(3)
    X = rng.standard_normal((args.rows, args.features))
    y = X @ rng.uniform(-1, 1, args.features) + rng.standard_t(3, args.rows)
    Xd, yd = cp.asarray(X), cp.asarray(y)
    model = RenewableHuberRegressor(backend="native_cuda", device="cuda", dtype="float64",
                                    penalty="none")
    for _ in range(30):
        model.partial_fit(Xd, yd)
    cp.cuda.Device().synchronize()
    backend = model._backend
    stream = backend._stream
    print(f"{args.rows} x {args.features} float64, CuPy current stream "
          f"{cp.cuda.get_current_stream().ptr:#x}, engine stream {stream:#x}")

    per_call("partial_fit", lambda: model.partial_fit(Xd, yd), max(args.calls // 7, 1))
    per_call("X.__dlpack_device__()", Xd.__dlpack_device__, args.calls)
    per_call("X.__dlpack__() (capsule unused)", lambda: Xd.__dlpack__(), args.calls)
    per_call("X.__dlpack__(stream=1)", lambda: Xd.__dlpack__(stream=1), args.calls)
    per_call("X.__dlpack__(stream=engine stream)", lambda: Xd.__dlpack__(stream=stream),
             args.calls)

    def borrow_x() -> None:
        with backend._borrow(Xd, "X", 2):
            pass

    per_call("borrow of X (enter and exit)", borrow_x, args.calls)
    event = cp.cuda.Event(disable_timing=True)
    with warnings.catch_warnings():  # CuPy 14 deprecates ExternalStream for stream objects
        warnings.simplefilter("ignore", DeprecationWarning)
        engine_stream = cp.cuda.ExternalStream(stream) if stream else cp.cuda.Stream.null
    per_call("cupy.cuda.Event()", lambda: cp.cuda.Event(disable_timing=True), args.calls)
    per_call("event.record() on the current stream", event.record, args.calls)
    per_call("engine stream.wait_event(event)", lambda: engine_stream.wait_event(event),
             args.calls)
    params = model._validated_params()

    def validate() -> None:
        validate_batch(Xd, yd, None, dtype=params.dtype, accepts_device=True,
                       backend_name="native_cuda", n_features_expected=args.features,
                       feature_names_expected=None, engine_checks_finite=True)

    per_call("validate_batch", validate, args.calls // 4)

    profile = cProfile.Profile()
    profile.enable()
    for _ in range(3000):
        model.partial_fit(Xd, yd)
    profile.disable()
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(30)
    print(text.getvalue())


if __name__ == "__main__":
    main()
