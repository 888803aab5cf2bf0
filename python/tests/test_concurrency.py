"""Concurrency: estimators used from several threads.

* Eight threads, each with its own estimator (numpy and native_cpu; float32 and float64; both
  penalties), give results bitwise equal to the same streams run one after another.
* One estimator shared by threads that call partial_fit, predict, score, state_dict, save and
  pickle at the same time: no batch is lost (n_samples_seen, batch_count and weight_sum are the
  totals), nothing raises, and every checkpoint or pickle taken meanwhile is a consistent
  state (never half of one batch's commit). The estimator documents that calls on one
  estimator are serialised.

The interpreter's switch interval is shortened while threads run, so that a thread is
interrupted between any two bytecodes often enough for unsynchronised code to show its races.
RH_FUZZ_LONG=1 runs more rounds and batches.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import sys
import threading

import numpy as np
import pytest

from renewable_huber import RenewableHuberRegressor
from renewable_huber.checkpoint import load_checkpoint

LONG = bool(os.environ.get("RH_FUZZ_LONG"))
THREADS = 8
ROUNDS = 10 if LONG else 2


@contextlib.contextmanager
def _frequent_switches():
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


def _batches(seed: int, n_batches: int, n: int = 40, p: int = 3):
    rng = np.random.default_rng(seed)
    beta = np.array([1.0, -2.0, 0.5])[:p]
    out = []
    for _ in range(n_batches):
        X = rng.normal(size=(n, p))
        out.append((X, X @ beta + 0.3 + rng.standard_t(3, size=n)))
    return out


def _params(index: int, backend: str) -> dict:
    return dict(backend=backend, penalty="l1" if index % 2 else "none",
                dtype="float32" if index % 3 == 0 else "float64")


def _own_stream(index: int, backend: str) -> tuple[bytes, ...]:
    """One thread's work: its own estimator over its own batches; everything it computed."""
    model = RenewableHuberRegressor(**_params(index, backend))
    batches = _batches(seed=100 + index, n_batches=8)
    for X, y in batches:
        model.partial_fit(X, y)
    state = model.state_
    predictions = model.predict(batches[0][0])
    return (state.coefficients.tobytes(), state.information.tobytes(),
            np.int64(state.n_samples_seen).tobytes(), np.float64(state.weight_sum).tobytes(),
            np.float64(state.previous_lambda).tobytes(), np.asarray(predictions).tobytes())


def _run_threads(target, count: int) -> list:
    """Runs target(i) in `count` threads started together; returns results, re-raises errors."""
    results: list = [None] * count
    errors: list = []
    barrier = threading.Barrier(count)

    def run(i):
        try:
            barrier.wait()
            results[i] = target(i)
        except BaseException as error:  # collected, re-raised in the main thread
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    with _frequent_switches():
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    if errors:
        raise errors[0]
    return results


@pytest.fixture(params=["numpy", "native_cpu"])
def backend(request):
    if request.param == "native_cpu":
        request.getfixturevalue("cpu_library")  # skips with the reason when there is none
    return request.param


def test_own_estimator_per_thread_matches_serial_runs(backend):
    serial = [_own_stream(i, backend) for i in range(THREADS)]
    assert len(set(serial)) == THREADS  # the streams differ, so a mix-up would show
    for _ in range(ROUNDS):
        concurrent = _run_threads(lambda i: _own_stream(i, backend), THREADS)
        for i in range(THREADS):
            assert concurrent[i] == serial[i], f"thread {i} differs from its serial run"


def _consistent(n_samples_seen: int, batch_count: int, weight_sum: float, rows: int) -> bool:
    """Every batch of the shared stream has `rows` unit-weight rows."""
    return n_samples_seen == batch_count * rows and weight_sum == float(n_samples_seen)


def _shared_round(backend: str, folder, seed: int, writers: int, per_writer: int) -> None:
    rows = 30
    model = RenewableHuberRegressor(backend=backend)
    X0, y0 = _batches(seed=seed, n_batches=1, n=rows)[0]
    model.partial_fit(X0, y0)
    work = {w: _batches(seed=seed * 100 + w, n_batches=per_writer, n=rows)
            for w in range(writers)}
    probe = X0[:5]
    done = threading.Event()
    snapshots: list[tuple] = []

    def role(i):
        if i < writers:  # fold batches, predicting after each
            for X, y in work[i]:
                model.partial_fit(X, y)
                assert np.isfinite(model.predict(probe)).all()
            return
        if i == writers:  # predict and score while batches fold
            count = 0
            while not done.is_set() or count == 0:
                predictions = model.predict(probe)
                assert predictions.shape == (5,) and np.isfinite(predictions).all()
                assert np.isfinite(model.score(X0, y0))
                count += 1
            return
        # save, state_dict and pickle while batches fold: each must be one whole state
        count = 0
        path = folder / f"shared{seed}.npz"
        while not done.is_set() or count == 0:
            model.save(path)
            payload = load_checkpoint(path)
            snapshots.append((payload["n_samples_seen"], payload["batch_count"],
                              payload["weight_sum"]))
            d = model.state_dict()
            snapshots.append((d["n_samples_seen"], d["batch_count"], d["weight_sum"]))
            s = pickle.loads(pickle.dumps(model)).state_
            snapshots.append((s.n_samples_seen, s.batch_count, s.weight_sum))
            count += 1

    # Writers and two observers start together; the observers stop once every writer is done.
    errors: list = []
    barrier = threading.Barrier(writers + 2)

    def worker(i):
        try:
            barrier.wait()
            role(i)
        except BaseException as error:  # collected, reported by the main thread
            errors.append(error)

    writer_threads = [threading.Thread(target=worker, args=(i,)) for i in range(writers)]
    observers = [threading.Thread(target=worker, args=(i,)) for i in (writers, writers + 1)]
    with _frequent_switches():
        for thread in writer_threads + observers:
            thread.start()
        for thread in writer_threads:
            thread.join()
        done.set()
        for thread in observers:
            thread.join()
    assert not errors, f"{len(errors)} call(s) raised; first: {errors[0]!r}"

    batches = 1 + writers * per_writer
    assert model.n_samples_seen_ == batches * rows, "batches were lost"
    state = model.state_
    assert (state.batch_count, state.n_samples_seen) == (batches, batches * rows)
    assert state.weight_sum == float(batches * rows)
    assert snapshots, "the observer took no snapshot"
    torn = [s for s in snapshots if not _consistent(*s, rows)]
    assert not torn, f"inconsistent snapshots taken while fitting: {torn[:3]}"


def test_shared_estimator_loses_no_batch(backend, tmp_path):
    # A lost update needs two threads inside one commit window: the native engine's calls are
    # short, so it gets more rounds to meet one. Without the estimator's lock the numpy case
    # fails every run and the native_cpu case about two runs in three (4 of 6 when measured).
    rounds = {"numpy": 2, "native_cpu": 20}[backend] * (5 if LONG else 1)
    for round_index in range(rounds):
        _shared_round(backend, tmp_path, seed=round_index + 1, writers=THREADS,
                      per_writer=50 if backend == "native_cpu" else 8)


def test_shared_estimator_documents_the_rule():
    # the rule the test above relies on is part of the estimator's documentation
    doc = " ".join(RenewableHuberRegressor.__doc__.split())
    assert "calls on one estimator are serialised" in doc
