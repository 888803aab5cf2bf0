"""`renewable-huber fit --dask`: a Parquet dataset streamed in batches of partitions read on
the workers of a local cluster equals the in-process stream of the same batches."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from cli_support import one_error_line, run
from dask_support import requires_dask

from renewable_huber import RenewableHuberRegressor
from renewable_huber.checkpoint import load_checkpoint

try:
    import pyarrow  # noqa: F401
except ImportError:
    pyarrow = None

pytestmark = [
    requires_dask,
    pytest.mark.skipif(pyarrow is None, reason="reading Parquet needs pyarrow"),
]

FEATURES = ["a", "b", "c"]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """Three Parquet files (one partition each) with a text column to leave out."""
    folder = tmp_path_factory.mktemp("parquet")
    rng = np.random.default_rng(21)
    frames, paths = [], []
    for index in range(3):
        X = rng.normal(size=(300, 3))
        frame = pd.DataFrame(X, columns=FEATURES)
        frame["y"] = X @ [2.0, -1.0, 0.5] + 1.0 + rng.standard_t(2, size=300)
        frame["w"] = rng.uniform(0.5, 2.0, size=300)
        frame["label"] = [f"row{i}" for i in range(300)]
        path = folder / f"part-{index}.parquet"
        frame.to_parquet(path, index=False)
        frames.append(frame)
        paths.append(path)
    return frames, paths


def _in_process(frames, groups, weights: bool):
    model = RenewableHuberRegressor(backend="numpy")
    for group in groups:
        batch = pd.concat([frames[i] for i in group])
        model.partial_fit(batch[FEATURES], batch["y"],
                          sample_weight=batch["w"] if weights else None)
    return model


def test_fit_on_a_local_cluster_streams_batches_of_partitions(dataset, capsys):
    frames, paths = dataset
    status, out, err = run(["fit", "--dask", "local:2", *paths, "--target", "y",
                            "--weight-column", "w", "--partitions-per-batch", "2",
                            "--backend", "numpy", "--json", "--no-progress"], capsys)
    assert status == 0, err
    assert "not numeric, left out of the features: label" in err
    document = json.loads(out)
    expected = _in_process(frames, [(0, 1), (2,)], weights=True)
    assert document["batch_count"] == 2 and document["n_samples_seen"] == 900
    assert document["features"] == FEATURES
    np.testing.assert_allclose(list(document["coefficients"].values()), expected.coef_,
                               rtol=1e-10)
    assert document["intercept"] == pytest.approx(float(expected.intercept_), rel=1e-10)


def test_fit_on_a_local_cluster_reads_a_directory_and_saves_a_checkpoint(dataset, capsys,
                                                                        tmp_path):
    frames, paths = dataset
    checkpoint = tmp_path / "model.npz"
    status, out, err = run(["fit", "--dask", "local:1", str(paths[0].parent), "--target", "y",
                            "--features", "a,b,c", "--backend", "numpy", "--checkpoint",
                            checkpoint, "--no-progress"], capsys)
    assert status == 0, err
    assert "batches of 1 partitions" in out  # one worker: one partition per batch
    saved = RenewableHuberRegressor.load(checkpoint)
    expected = _in_process(frames, [(0,), (1,), (2,)], weights=False)
    np.testing.assert_allclose(saved.coef_, expected.coef_, rtol=1e-10)
    assert saved.n_samples_seen_ == 900


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--resume", "x.npz", "--tau", "1"], "--tau cannot be combined with --resume"),
        (["--batch-size", "10", "--partitions-per-batch", "2"],
         "--batch-size and --partitions-per-batch cannot be combined"),
        (["--dask", "local:zero"], "local:N needs a worker count"),
    ],
)
def test_options_that_do_not_apply_to_a_cluster_are_refused(dataset, capsys, extra, message):
    _, paths = dataset
    argv = ["fit", *paths, "--target", "y", "--no-progress"]
    if "--dask" not in extra:
        argv += ["--dask", "local:1"]
    status, _, err = run(argv + extra, capsys)
    assert status != 0
    assert message in one_error_line(err)


def test_several_files_without_dask_are_refused(dataset, capsys):
    _, paths = dataset
    status, _, err = run(["fit", *paths, "--target", "y"], capsys)
    assert status != 0
    assert "several files, globs or directories need --dask" in one_error_line(err)


def test_a_missing_column_is_one_error_line(dataset, capsys):
    _, paths = dataset
    status, _, err = run(["fit", "--dask", "local:1", *paths, "--target", "nope",
                          "--no-progress"], capsys)
    assert status != 0
    assert "no column 'nope'" in one_error_line(err)


def test_fit_connects_to_a_running_scheduler_by_address(dataset, capsys):
    from dask_support import local_cluster

    frames, paths = dataset
    with local_cluster(1) as client:
        address = client.scheduler.address
        status, out, err = run(["fit", "--dask", address, *paths, "--target", "y",
                                "--features", "a,b,c", "--backend", "numpy", "--json",
                                "--no-progress"], capsys)
    assert status == 0, err
    document = json.loads(out)
    assert document["dask"] == address and document["partitions_per_batch"] == 1
    expected = _in_process(frames, [(0,), (1,), (2,)], weights=False)
    np.testing.assert_allclose(list(document["coefficients"].values()), expected.coef_,
                               rtol=1e-10)


def _cluster_fit(address, paths, *extra):
    return ["fit", "--dask", address, *map(str, paths), "--target", "y", "--features",
            "a,b,c", "--backend", "numpy", "--partitions-per-batch", "1", "--no-progress",
            *map(str, extra)]


def _interrupt_at_batch(monkeypatch, k: int):
    """fit --dask stops with Ctrl-C as its k-th batch starts; returns the undo."""
    from renewable_huber.dask import command

    fit_one_batch, calls = command._fit_one_batch, []

    def interrupted(*args):
        calls.append(1)
        if len(calls) == k:
            raise KeyboardInterrupt
        return fit_one_batch(*args)

    monkeypatch.setattr(command, "_fit_one_batch", interrupted)
    return lambda: monkeypatch.setattr(command, "_fit_one_batch", fit_one_batch)


def _interrupted_after_two_batches(address, paths, checkpoint, capsys, monkeypatch):
    """A fit of the three partitions with Ctrl-C during the third batch."""
    restore_batches = _interrupt_at_batch(monkeypatch, 3)
    status, _, err = run(_cluster_fit(address, paths, "--checkpoint", checkpoint), capsys)
    assert status == 130, err
    held = RenewableHuberRegressor.load(checkpoint)
    assert held.state_.batch_count == 2 and held.n_samples_seen_ == 600
    restore_batches()


def test_resume_after_an_interruption_equals_the_uninterrupted_stream(dataset, address, capsys,
                                                                      tmp_path, monkeypatch):
    frames, paths = dataset
    checkpoint = tmp_path / "model.npz"
    _interrupted_after_two_batches(address, paths, checkpoint, capsys, monkeypatch)
    status, out, err = run(_cluster_fit(address, paths, "--resume", checkpoint, "--checkpoint",
                                        checkpoint, "--json"), capsys)
    assert status == 0, err
    document = json.loads(out)
    assert document["run"]["first_partition"] == 2 and document["run"]["batches"] == 1
    expected = _in_process(frames, [(0,), (1,), (2,)], weights=False)
    assert document["n_samples_seen"] == 900 and document["batch_count"] == 3
    np.testing.assert_allclose(list(document["coefficients"].values()), expected.coef_,
                               rtol=1e-10, atol=1e-12)
    assert document["intercept"] == pytest.approx(float(expected.intercept_), rel=1e-10)
    np.testing.assert_allclose(RenewableHuberRegressor.load(checkpoint).coef_, expected.coef_,
                               rtol=1e-10, atol=1e-12)

    # Every partition is now held: a further resume has nothing to fit.
    status, _, err = run(_cluster_fit(address, paths, "--resume", checkpoint), capsys)
    assert status == 1
    assert "nothing new to fit" in one_error_line(err)


def test_resume_on_another_dataset_is_refused(dataset, address, capsys, tmp_path):
    """The recorded files in another order (or others) are not the dataset, nor one that
    gained files since."""
    _, paths = dataset
    checkpoint = tmp_path / "model.npz"
    status, _, err = run(_cluster_fit(address, paths[:2], "--checkpoint", checkpoint), capsys)
    assert status == 0, err
    before = checkpoint.read_bytes()
    for data in ([paths[1], paths[0], paths[2]], paths[1:]):
        status, _, err = run(_cluster_fit(address, data, "--resume", checkpoint,
                                          "--checkpoint", checkpoint), capsys)
        assert status == 1
        assert "is not the dataset" in one_error_line(err)
        assert checkpoint.read_bytes() == before  # refused before any batch: nothing written


def test_resume_on_a_dataset_that_gained_files_continues_after_the_rows_held(
        dataset, address, capsys, tmp_path):
    """DATA = the recorded files, in order, and more: --resume (without --new-data) continues
    after the partitions the model holds, as one stream over all the files."""
    frames, paths = dataset
    checkpoint = tmp_path / "model.npz"
    status, _, err = run(_cluster_fit(address, paths[:2], "--checkpoint", checkpoint), capsys)
    assert status == 0, err
    status, _, err = run(_cluster_fit(address, paths, "--resume", checkpoint, "--checkpoint",
                                      checkpoint), capsys)
    assert status == 0, err
    _assert_same_model(RenewableHuberRegressor.load(checkpoint),
                       _stream_of_rows(frames, [(0, 300), (300, 600), (600, 900)]))
    source = load_checkpoint(checkpoint)["source"]
    assert (source["partitions"], source["rows"], len(source["files"])) == (3, 900, 3)


def test_a_gained_dataset_whose_held_partitions_moved_is_refused():
    """The rows of the partitions a checkpoint holds are counted in the grown dataset: another
    count (the files split into other partitions) refuses the resume; the recorded count, with
    a cut inside the next partition, passes."""
    import argparse

    from renewable_huber.cli import ResumeRefused
    from renewable_huber.dask.command import _check_rows_held

    class Table:  # three partitions of 300 rows, as dask.dataframe shows them
        npartitions = 3
        partitions = [pd.DataFrame({"y": np.zeros(300)})] * 3

    args = argparse.Namespace(target="y", data=["grown/"], resume="model.npz")
    _check_rows_held(args, Table, {"partitions": 2, "rows": 600})
    _check_rows_held(args, Table, {"partitions": 1, "rows": 450, "partition_rows": 150})
    for source in ({"partitions": 2, "rows": 500},
                   {"partitions": 1, "rows": 700, "partition_rows": 400},
                   {"partitions": 3, "rows": 900, "partition_rows": 10}):
        with pytest.raises(ResumeRefused, match="split into partitions differently now"):
            _check_rows_held(args, Table, source)


def test_resume_of_a_single_file_checkpoint_with_dask_is_refused(dataset, address, capsys,
                                                                 tmp_path):
    frames, paths = dataset
    checkpoint = tmp_path / "model.npz"
    status, _, err = run(["fit", str(paths[0]), "--target", "y", "--features", "a,b,c",
                          "--backend", "numpy", "--checkpoint", checkpoint, "--no-progress"],
                         capsys)
    assert status == 0, err
    status, _, err = run(_cluster_fit(address, paths, "--resume", checkpoint), capsys)
    assert status == 1
    assert "not on a dataset with --dask" in one_error_line(err)


def test_strict_stops_at_the_first_unconverged_batch_keeping_the_converged_checkpoint(
        dataset, address, capsys, tmp_path, monkeypatch):
    frames, paths = dataset
    checkpoint = tmp_path / "model.npz"
    # A fresh stream whose first batch cannot converge in one iteration: exit 3, no file.
    status, _, err = run(_cluster_fit(address, paths, "--strict", "--max-iter", "1", "--checkpoint",
                                      checkpoint), capsys)
    assert status == 3, err
    line = one_error_line(err)
    assert "batch 1 (partitions 0-0 of 3) did not converge" in line
    assert "not written: no batch of this stream converged" in line
    assert not checkpoint.exists()

    # Two converged batches (a run interrupted before its third), then the third held to one
    # iteration: exit 3, and the checkpoint keeps the two converged batches and the count of
    # partitions they hold.
    _interrupted_after_two_batches(address, paths, checkpoint, capsys, monkeypatch)
    two = RenewableHuberRegressor.load(checkpoint)
    status, _, err = run(_cluster_fit(address, paths, "--resume", checkpoint, "--checkpoint",
                                      checkpoint, "--strict", "--max-iter", "1"), capsys)
    assert status == 3, err
    line = one_error_line(err)
    assert "batch 3 (partitions 2-2 of 3) did not converge" in line
    assert "holds the stream through batch 2 (600 rows)" in line
    kept = RenewableHuberRegressor.load(checkpoint)
    assert kept.state_.batch_count == 2 and kept.n_samples_seen_ == 600
    np.testing.assert_array_equal(kept.coef_, two.coef_)
    expected = _in_process(frames, [(0,), (1,)], weights=False)
    np.testing.assert_allclose(kept.coef_, expected.coef_, rtol=1e-10, atol=1e-12)
    assert load_checkpoint(checkpoint)["source"]["partitions"] == 2


def test_the_source_record_takes_an_optional_partition_count():
    from renewable_huber.checkpoint import validate_source
    from renewable_huber.exceptions import ValidationError

    record = {"path": "data", "size": 10, "prefix_bytes": 10, "prefix_sha256": "0" * 64,
              "rows": 4}
    assert validate_source(record) == record  # a record without it stays valid
    assert validate_source({**record, "partitions": 2})["partitions"] == 2
    for bad in (-1, 1.5, True, "2"):
        with pytest.raises(ValidationError, match="source.partitions must be an integer"):
            validate_source({**record, "partitions": bad})
    # --batch-size: rows of the next partition held too, counted in rows
    assert validate_source({**record, "partitions": 1, "partition_rows": 3})[
        "partition_rows"] == 3
    for bad, message in (({"partition_rows": 3}, "partition_rows needs source.partitions"),
                         ({"partitions": 1, "partition_rows": 0}, "must be an integer from 1"),
                         ({"partitions": 1, "partition_rows": 5}, "exceeds source.rows 4")):
        with pytest.raises(ValidationError, match=message):
            validate_source({**record, **bad})
    # the dataset's files, each by a 16-digit fingerprint
    files = ["0123456789abcdef", "fedcba9876543210"]
    assert validate_source({**record, "partitions": 1, "files": files})["files"] == files
    for bad, message in (({"files": files}, "files needs source.partitions"),
                         ({"partitions": 1, "files": []}, "must be a list of 1 to"),
                         ({"partitions": 1, "files": ["0123"]}, "must be a list of 1 to"),
                         ({"partitions": 1, "files": "0123456789abcdef"}, "must be a list")):
        with pytest.raises(ValidationError, match=message):
            validate_source({**record, **bad})


# --- the options of `fit` that follow the stream's rows, under --dask ----------------------
#
# Each run below is compared with the same command without --dask on one Parquet file that
# holds the dataset's rows in its order: batches of K partitions of 300 rows are batches of
# 300 K rows there. The cluster is one in-process worker (threads), reached by its address.


@pytest.fixture(scope="module")
def address():
    from dask_support import local_cluster

    with local_cluster(1, processes=False) as client:
        yield client.scheduler.address


@pytest.fixture(scope="module")
def whole(dataset, tmp_path_factory):
    """The dataset's rows as one Parquet file (and each file's frames), outside its folder."""
    frames, _ = dataset
    path = tmp_path_factory.mktemp("whole") / "whole.parquet"
    pd.concat(frames, ignore_index=True).to_parquet(path, index=False)
    return path


def _common(weights: bool):
    return ["--target", "y", "--features", "a,b,c", "--backend", "numpy", "--no-progress",
            *(["--weight-column", "w"] if weights else [])]


def _on_cluster(address, paths, K, *extra, weights=False):
    return ["fit", "--dask", address, *map(str, paths), "--partitions-per-batch", str(K),
            *_common(weights), *map(str, extra)]


def _in_process_cli(path, rows, *extra, weights=False):
    return ["fit", str(path), "--batch-size", str(rows), *_common(weights), *map(str, extra)]


def _recording_saves(monkeypatch):
    """Every checkpoint write as (batch_count, rows of the source record): the batch
    boundaries at which a run saved."""
    import renewable_huber.checkpoint as checkpoint_module

    save, writes = checkpoint_module.save_checkpoint, []

    def recording(path, state, *args, **kwargs):
        writes.append((int(state["batch_count"]), int(kwargs["source"]["rows"])))
        return save(path, state, *args, **kwargs)

    monkeypatch.setattr(checkpoint_module, "save_checkpoint", recording)
    return writes


def _assert_same_model(left, right):
    np.testing.assert_allclose(left.coef_, right.coef_, rtol=1e-10, atol=1e-12)
    assert float(left.intercept_) == pytest.approx(float(right.intercept_), rel=1e-10)
    assert left.n_samples_seen_ == right.n_samples_seen_
    assert left.state_.batch_count == right.state_.batch_count
    assert left.state_.weight_sum == pytest.approx(right.state_.weight_sum, rel=1e-12)


def test_a_standardised_cluster_fit_equals_the_in_process_one_and_resumes(
        dataset, whole, address, capsys, tmp_path):
    """--standardize on a cluster: the first batch's scaling from per-partition moments, each
    partition standardised on its worker; the same model as the in-process fit of the same
    batches, and a --dask --resume of its checkpoint continues it as the uninterrupted run."""
    _, paths = dataset
    options = ["--penalty", "l1", "--tau", "auto", "--standardize"]
    cluster, local = tmp_path / "cluster.npz", tmp_path / "local.npz"
    status, out, err = run(_on_cluster(address, paths, 1, *options, "--checkpoint", cluster,
                                       weights=True), capsys)
    assert status == 0, err
    assert "features: standardised with the centre and scale" in out
    status, _, err = run(_in_process_cli(whole, 300, *options, "--checkpoint", local,
                                         weights=True), capsys)
    assert status == 0, err
    on_cluster, in_process = (RenewableHuberRegressor.load(p) for p in (cluster, local))
    assert on_cluster.standardize and in_process.standardize
    a, b = (m.state_dict()["feature_scaling"] for m in (on_cluster, in_process))
    np.testing.assert_allclose(a["center"], b["center"], rtol=1e-13)
    np.testing.assert_allclose(a["scale"], b["scale"], rtol=1e-12)
    _assert_same_model(on_cluster, in_process)
    # Two files, then the dataset with its third file from the checkpoint, on the cluster:
    # the resumed stream keeps the first batch's scaling and ends as the uninterrupted one.
    half = tmp_path / "half.npz"
    status, _, err = run(_on_cluster(address, paths[:2], 1, *options, "--checkpoint", half,
                                     weights=True), capsys)
    assert status == 0, err
    status, _, err = run(_on_cluster(address, paths, 1, "--resume", half, "--checkpoint", half,
                                     weights=True), capsys)
    assert status == 0, err
    resumed = RenewableHuberRegressor.load(half)
    assert resumed.state_dict()["feature_scaling"] == on_cluster.state_dict()["feature_scaling"]
    np.testing.assert_array_equal(resumed.state_.coefficients, on_cluster.state_.coefficients)


@pytest.mark.parametrize(
    ("cadence", "saved_after"),
    [
        (["--checkpoint-every", "2"], [2, 3]),
        (["--checkpoint-every", "0"], [3]),
        (["--checkpoint-seconds", "0"], [3]),
        (["--checkpoint-seconds", "1e-9"], [1, 2, 3]),  # always due: after every batch
        (["--checkpoint-every", "2", "--checkpoint-seconds", "3600"], [2, 3]),
    ],
)
def test_checkpoint_cadence_saves_at_the_batches_an_in_process_fit_saves(
        dataset, whole, address, capsys, tmp_path, monkeypatch, cadence, saved_after):
    _, paths = dataset
    writes = _recording_saves(monkeypatch)
    in_process, on_cluster = tmp_path / "in_process.npz", tmp_path / "on_cluster.npz"
    status, _, err = run(_in_process_cli(whole, 300, "--checkpoint", in_process, *cadence),
                         capsys)
    assert status == 0, err
    expected_writes, writes[:] = list(writes), []
    status, _, err = run(_on_cluster(address, paths, 1, "--checkpoint", on_cluster, *cadence),
                         capsys)
    assert status == 0, err
    assert [batches for batches, _ in expected_writes] == saved_after
    assert writes == expected_writes  # the same batches, and the same rows recorded
    _assert_same_model(RenewableHuberRegressor.load(on_cluster),
                       RenewableHuberRegressor.load(in_process))
    source = load_checkpoint(on_cluster)["source"]
    assert source["partitions"] == 3 and source["rows"] == 900


def test_without_a_cadence_option_a_cluster_fit_saves_after_every_batch(
        dataset, address, capsys, tmp_path, monkeypatch):
    _, paths = dataset
    writes = _recording_saves(monkeypatch)
    status, out, err = run(_on_cluster(address, paths, 2, "--checkpoint", tmp_path / "m.npz"),
                           capsys)
    assert status == 0, err
    assert writes == [(1, 600), (2, 900)]
    assert "written 2 times; holds the first 3 partitions, 900 rows" in out
    status, out, err = run(["inspect", tmp_path / "m.npz"], capsys)
    assert status == 0, err
    assert "holds its first 3 partitions, 900 data rows" in out


@pytest.mark.parametrize(("skip", "K"), [(450, 1), (450, 2), (300, 1), (299, 2), (0, 1)])
def test_skip_rows_starts_where_an_in_process_fit_starts(dataset, whole, address, capsys,
                                                         tmp_path, skip, K):
    _, paths = dataset
    in_process, on_cluster = tmp_path / "in_process.npz", tmp_path / "on_cluster.npz"
    status, _, err = run(_in_process_cli(whole, 300 * K, "--skip-rows", skip, "--checkpoint",
                                         in_process, weights=True), capsys)
    assert status == 0, err
    status, out, err = run(_on_cluster(address, paths, K, "--skip-rows", skip, "--checkpoint",
                                       on_cluster, "--json", weights=True), capsys)
    assert status == 0, err
    document = json.loads(out)
    assert document["n_samples_seen"] == 900 - skip
    assert document["run"]["started_after_row"] == skip
    assert document["run"]["first_partition"] == skip // 300
    _assert_same_model(RenewableHuberRegressor.load(on_cluster),
                       RenewableHuberRegressor.load(in_process))
    assert load_checkpoint(on_cluster)["source"]["rows"] == 900
    assert load_checkpoint(in_process)["source"]["rows"] == 900


def test_a_skipped_then_interrupted_cluster_fit_resumes_to_the_uninterrupted_stream(
        dataset, whole, address, capsys, tmp_path, monkeypatch):
    """--skip-rows 150 --checkpoint-every 0, Ctrl-C during the third batch: the two batches
    done are saved then, and --resume continues to the state of the uninterrupted fit."""
    _, paths = dataset
    checkpoint, reference = tmp_path / "model.npz", tmp_path / "reference.npz"
    status, _, err = run(_in_process_cli(whole, 300, "--skip-rows", 150, "--checkpoint",
                                         reference), capsys)
    assert status == 0, err

    restore_batches = _interrupt_at_batch(monkeypatch, 3)
    writes = _recording_saves(monkeypatch)
    status, _, err = run(_on_cluster(address, paths, 1, "--skip-rows", 150, "--checkpoint",
                                     checkpoint, "--checkpoint-every", 0), capsys)
    assert status == 130
    line = one_error_line(err)
    assert "holds the first 2 partitions (600 rows) of the dataset; resume with:" in line
    assert line.endswith(f"--resume {checkpoint} --no-progress")
    assert writes == [(2, 600)]  # nothing before Ctrl-C (--checkpoint-every 0), then once
    source = load_checkpoint(checkpoint)["source"]
    assert (source["partitions"], source["rows"]) == (2, 600)
    restore_batches()

    # --skip-rows fewer than the rows held would fold rows in twice: refused, nothing written.
    before = checkpoint.read_bytes()
    status, _, err = run(_on_cluster(address, paths, 1, "--resume", checkpoint, "--checkpoint",
                                     checkpoint, "--skip-rows", 150), capsys)
    assert status == 1
    assert "--skip-rows 150 would fold rows 151-600" in one_error_line(err)
    assert checkpoint.read_bytes() == before

    copy = tmp_path / "copy.npz"
    copy.write_bytes(before)
    status, _, err = run(_on_cluster(address, paths, 1, "--resume", checkpoint, "--checkpoint",
                                     checkpoint), capsys)
    assert status == 0, err
    _assert_same_model(RenewableHuberRegressor.load(checkpoint),
                       RenewableHuberRegressor.load(reference))

    # More rows skipped than held: the rest of partition 2 after its first 100 rows.
    status, out, err = run(_on_cluster(address, paths, 1, "--resume", copy, "--checkpoint",
                                       copy, "--skip-rows", 700, "--json"), capsys)
    assert status == 0, err
    assert json.loads(out)["run"]["first_partition"] == 2
    frames, _ = dataset
    _assert_same_model(RenewableHuberRegressor.load(copy),
                       _stream_of_rows(frames, [(150, 300), (300, 600), (700, 900)]))
    assert load_checkpoint(copy)["source"]["rows"] == 900


def _stream_of_rows(frames, spans, weights=False):
    """The NumPy-side reference: partial_fit on the dataset's rows [lo, hi) for each span."""
    rows = pd.concat(frames, ignore_index=True)
    model = RenewableHuberRegressor(backend="numpy")
    for lo, hi in spans:
        batch = rows.iloc[lo:hi]
        model.partial_fit(batch[FEATURES], batch["y"],
                          sample_weight=batch["w"] if weights else None)
    return model


def test_new_data_continues_a_one_file_model_on_a_dataset_as_in_process(
        dataset, whole, address, capsys, tmp_path):
    """A model fitted without --dask on the first file, continued on the two others: on the
    cluster with --resume --new-data, and in process on one file holding their rows."""
    frames, paths = dataset
    rest = tmp_path / "rest.parquet"
    pd.concat(frames[1:], ignore_index=True).to_parquet(rest, index=False)
    in_process, on_cluster = tmp_path / "in_process.npz", tmp_path / "on_cluster.npz"
    for path in (in_process, on_cluster):
        status, _, err = run(_in_process_cli(paths[0], 300, "--checkpoint", path), capsys)
        assert status == 0, err
    status, _, err = run(_in_process_cli(rest, 300, "--resume", in_process, "--new-data",
                                         "--checkpoint", in_process), capsys)
    assert status == 0, err
    status, out, err = run(_on_cluster(address, paths[1:], 1, "--resume", on_cluster,
                                       "--new-data", "--checkpoint", on_cluster, "--json"),
                           capsys)
    assert status == 0, err
    document = json.loads(out)
    assert document["run"]["new_data"] and document["run"]["first_partition"] == 0
    _assert_same_model(RenewableHuberRegressor.load(on_cluster),
                       RenewableHuberRegressor.load(in_process))
    _assert_same_model(RenewableHuberRegressor.load(on_cluster),
                       _stream_of_rows(frames, [(0, 300), (300, 600), (600, 900)]))
    source = load_checkpoint(on_cluster)["source"]
    assert (source["partitions"], source["rows"]) == (2, 600)  # of the new dataset


def test_new_data_continues_a_cluster_model_on_another_dataset(dataset, address, capsys,
                                                              tmp_path):
    frames, paths = dataset
    checkpoint = tmp_path / "model.npz"
    status, _, err = run(_on_cluster(address, paths[:2], 1, "--checkpoint", checkpoint,
                                     weights=True), capsys)
    assert status == 0, err
    status, _, err = run(_on_cluster(address, paths[2:], 1, "--resume", checkpoint,
                                     "--new-data", "--checkpoint", checkpoint, "--skip-rows",
                                     100, weights=True), capsys)
    assert status == 0, err
    _assert_same_model(RenewableHuberRegressor.load(checkpoint),
                       _stream_of_rows(frames, [(0, 300), (300, 600), (700, 900)],
                                       weights=True))


@pytest.mark.parametrize("copy", [False, True], ids=["the-file", "a-renamed-copy"])
def test_new_data_sharing_files_with_the_recorded_dataset_is_refused(dataset, address, capsys,
                                                                     tmp_path, copy):
    """Each file of a fit --dask dataset is recorded by its own fingerprint: DATA that holds
    one of them among new files (a directory with files added since, or a copy of one) is
    not new data, even though the dataset as a whole differs."""
    import shutil

    _, paths = dataset
    checkpoint = tmp_path / "model.npz"
    status, _, err = run(_on_cluster(address, paths[:2], 1, "--checkpoint", checkpoint),
                         capsys)
    assert status == 0, err
    source = load_checkpoint(checkpoint)["source"]
    assert len(source["files"]) == 2 and source["files"][0] != source["files"][1]
    before = checkpoint.read_bytes()
    shared = paths[1]
    if copy:
        shared = tmp_path / "renamed.parquet"
        shutil.copyfile(paths[1], shared)
    status, _, err = run(_on_cluster(address, [shared, paths[2]], 1, "--resume", checkpoint,
                                     "--new-data", "--checkpoint", checkpoint), capsys)
    assert status == 1
    assert (f"is not new data: its file {shared} is a file of the dataset"
            in one_error_line(err))
    assert checkpoint.read_bytes() == before
    status, _, err = run(_on_cluster(address, paths, 1, "--resume", checkpoint, "--new-data"),
                         capsys)
    assert status == 1 and "(and 1 more) is a file of the dataset" in one_error_line(err)


@pytest.mark.parametrize("case", ["same dataset", "recorded file among DATA"])
def test_new_data_on_rows_the_model_holds_is_refused(dataset, address, capsys, tmp_path,
                                                    case):
    _, paths = dataset
    checkpoint = tmp_path / "model.npz"
    if case == "same dataset":
        first = _on_cluster(address, paths[:2], 1, "--checkpoint", checkpoint)
        message = "is not new data: it is the dataset"
    else:
        first = _in_process_cli(paths[1], 300, "--checkpoint", checkpoint)
        message = f"is not new data: its file {paths[1]} starts with the bytes of"
    status, _, err = run(first, capsys)
    assert status == 0, err
    before = checkpoint.read_bytes()
    status, _, err = run(_on_cluster(address, paths[:2], 1, "--resume", checkpoint,
                                     "--new-data", "--checkpoint", checkpoint), capsys)
    assert status == 1
    assert message in one_error_line(err)
    assert checkpoint.read_bytes() == before


@pytest.mark.parametrize(
    ("extra", "status", "message"),
    [
        (["--new-data"], 2, "--new-data only applies with --resume"),
        (["--checkpoint-every", "2"], 2, "--checkpoint-every needs --checkpoint"),
        (["--checkpoint-seconds", "5"], 2, "--checkpoint-seconds needs --checkpoint"),
        (["--skip-rows", "900"], 1, "has no data rows after the first 900 (it has 900)"),
        (["--skip-rows", "5000"], 1, "has no data rows after the first 5,000 (it has 900)"),
    ],
)
def test_row_options_that_cannot_apply_are_refused_on_a_cluster(dataset, address, capsys,
                                                                extra, status, message):
    _, paths = dataset
    got, out, err = run(_on_cluster(address, paths, 1, *extra), capsys)
    assert got == status and out == ""
    assert message in one_error_line(err)


def test_strict_stop_before_a_skipped_resume_completes_a_batch_keeps_whole_partitions(
        dataset, address, capsys, tmp_path, monkeypatch):
    """A source record counts whole partitions: --strict stopping the first batch of a run
    that skipped into a partition records the partitions before it, and says to give
    --skip-rows again; doing so continues the stream as if it had not stopped."""
    frames, paths = dataset
    checkpoint = tmp_path / "model.npz"
    restore_batches = _interrupt_at_batch(monkeypatch, 2)
    status, _, err = run(_on_cluster(address, paths, 1, "--checkpoint", checkpoint), capsys)
    assert status == 130, err
    restore_batches()
    one = RenewableHuberRegressor.load(checkpoint)
    assert one.state_.batch_count == 1

    status, _, err = run(_on_cluster(address, paths, 1, "--resume", checkpoint, "--checkpoint",
                                     checkpoint, "--skip-rows", 450, "--strict", "--max-iter",
                                     1), capsys)
    assert status == 3, err
    line = one_error_line(err)
    assert "batch 2 (partitions 1-1 of 3 (after the first 150 rows of partition 1))" in line
    assert "it records the 1 partitions before the one holding row 451; give --skip-rows " \
           "450 again" in line
    source = load_checkpoint(checkpoint)["source"]
    assert (source["partitions"], source["rows"]) == (1, 300)
    np.testing.assert_array_equal(RenewableHuberRegressor.load(checkpoint).coef_, one.coef_)

    # (the checkpoint keeps the run's --max-iter 1: the default limit is given back)
    status, _, err = run(_on_cluster(address, paths, 1, "--resume", checkpoint, "--checkpoint",
                                     checkpoint, "--skip-rows", 450, "--max-iter", 100), capsys)
    assert status == 0, err
    _assert_same_model(RenewableHuberRegressor.load(checkpoint),
                       _stream_of_rows(frames, [(0, 300), (450, 600), (600, 900)]))


def test_inference_and_unconverged_batches_are_reported_as_in_process(dataset, whole, address,
                                                                      capsys):
    """--inference: the standard errors of the JSON document and the table under the summary
    equal the in-process ones; batches that do not converge get the same closing warning."""
    _, paths = dataset
    options = ["--inference", "--max-iter", "2", "--json"]
    status, out, err = run(_in_process_cli(whole, 300, *options, weights=True), capsys)
    assert status == 0, err
    expected, expected_err = json.loads(out), err
    status, out, err = run(_on_cluster(address, paths, 1, *options, weights=True), capsys)
    assert status == 0, err
    document = json.loads(out)
    assert document["inference_unavailable"] is None and document["dtype"] == "float64"
    names = ["a", "b", "c", "(intercept)"]
    np.testing.assert_allclose([document["standard_errors"][n] for n in names],
                               [expected["standard_errors"][n] for n in names], rtol=1e-10)
    assert document["not_converged"] == expected["not_converged"] > 0
    closing = [line for line in err.splitlines() if "batches did not converge" in line]
    assert closing == [line for line in expected_err.splitlines()
                       if "batches did not converge" in line]
    assert len(closing) == 1

    status, out, err = run(_on_cluster(address, paths, 1, "--inference", weights=True), capsys)
    assert status == 0, err
    assert "inference (sandwich covariance" in out
    status, out, err = run(_on_cluster(address, paths, 1), capsys)
    assert status == 0, err
    assert "standard errors: not computed (fit with --inference)" in out


# --- --batch-size under --dask: batches of B rows of the dataset, cut from its partitions -----


def _rows_on_cluster(address, paths, B, *extra, weights=False):
    return ["fit", "--dask", address, *map(str, paths), "--batch-size", str(B),
            *_common(weights), *map(str, extra)]


@pytest.mark.parametrize(("B", "extra"), [(250, []), (420, ["--skip-rows", "130"])],
                         ids=["250-rows", "420-rows-after-130"])
def test_batch_size_batches_rows_across_partitions_as_one_file_does(dataset, whole, address,
                                                                     capsys, B, extra):
    _, paths = dataset
    status, out, err = run(_in_process_cli(whole, B, "--json", *extra, weights=True), capsys)
    assert status == 0, err
    expected = json.loads(out)
    status, out, err = run(_rows_on_cluster(address, paths, B, "--json", *extra, weights=True),
                           capsys)
    assert status == 0, err
    document = json.loads(out)
    assert document["batch_size"] == B and document["partitions_per_batch"] is None
    assert document["batch_count"] == expected["batch_count"]
    assert document["n_samples_seen"] == expected["n_samples_seen"]
    # The same rows in the same batches, summed per partition instead of whole: two correct
    # orders of the same sums, whose solves may stop sqrt(eps cond(H)) (1 + ||beta||) apart
    # where a last Newton step is taken or halved on rounding (docs/decisions.md, "The line
    # search at the rounding floor"): about 1e-8 for these three well-scaled features. Which
    # way it goes depends on the BLAS kernel (OPENBLAS_CORETYPE=Nehalem: 5e-9; this machine's
    # default kernel: within 1e-10). A batch boundary one row off moves the answer by 7.5e-6
    # to 2e-4 relative (batches of 249 or 251 against 250, 419 or 421 against 420).
    np.testing.assert_allclose(list(document["coefficients"].values()),
                               list(expected["coefficients"].values()), rtol=1e-7, atol=1e-12)
    assert document["intercept"] == pytest.approx(expected["intercept"], rel=1e-7)


def test_batch_size_resumes_inside_a_partition_to_the_uninterrupted_stream(
        dataset, whole, address, capsys, tmp_path, monkeypatch):
    _, paths = dataset
    checkpoint = tmp_path / "rows.npz"
    restore_batches = _interrupt_at_batch(monkeypatch, 3)
    status, _, err = run(_rows_on_cluster(address, paths, 250, "--checkpoint", checkpoint),
                         capsys)
    assert status == 130, err
    assert "--batch-size 250" in one_error_line(err)  # the command that resumes
    restore_batches()
    # two batches of 250 rows: partition 0 and the first 200 rows of partition 1
    source = load_checkpoint(checkpoint)["source"]
    assert (source["partitions"], source["partition_rows"], source["rows"]) == (1, 200, 500)
    status, out, err = run(_rows_on_cluster(address, paths, 250, "--resume", checkpoint,
                                            "--json"), capsys)
    assert status == 0, err
    resumed = json.loads(out)
    assert resumed["run"]["batches"] == 2 and resumed["n_samples_seen"] == 900
    status, out, err = run(_in_process_cli(whole, 250, "--json"), capsys)
    assert status == 0, err
    expected = json.loads(out)
    assert resumed["batch_count"] == expected["batch_count"] == 4
    np.testing.assert_allclose(list(resumed["coefficients"].values()),
                               list(expected["coefficients"].values()), rtol=1e-10, atol=1e-12)
    # the same checkpoint resumed in batches of partitions starts after row 500 too
    status, out, err = run(_cluster_fit(address, paths, "--resume", checkpoint, "--json"),
                           capsys)
    assert status == 0, err
    regrouped = json.loads(out)
    assert regrouped["n_samples_seen"] == 900 and regrouped["run"]["started_after_row"] == 500


def test_one_file_new_data_after_a_cluster_checkpoint_refuses_a_recorded_file(
        dataset, address, capsys, tmp_path):
    frames, paths = dataset
    checkpoint = tmp_path / "model.npz"
    status, _, err = run(_on_cluster(address, paths[:2], 1, "--checkpoint", checkpoint),
                         capsys)
    assert status == 0, err
    before = checkpoint.read_bytes()
    status, _, err = run(_in_process_cli(paths[0], 300, "--resume", checkpoint, "--new-data",
                                         "--checkpoint", checkpoint), capsys)
    assert status == 1
    assert f"{paths[0]} is not new data: it is a file of the dataset" in one_error_line(err)
    assert checkpoint.read_bytes() == before
    status, _, err = run(_in_process_cli(paths[2], 300, "--resume", checkpoint, "--new-data",
                                         "--checkpoint", checkpoint), capsys)
    assert status == 0, err
    _assert_same_model(RenewableHuberRegressor.load(checkpoint),
                       _stream_of_rows(frames, [(0, 300), (300, 600), (600, 900)]))


def test_partition_engine_option_picks_the_workers_engine_for_the_run(dataset, address, capsys,
                                                                      monkeypatch):
    frames, paths = dataset
    monkeypatch.setenv("RH_DASK_PARTITION_ENGINE", "native_cpu")  # the option wins, then returns
    status, out, err = run(_cluster_fit(address, paths, "--partition-engine", "numpy",
                                        "--json"), capsys)
    assert status == 0, err
    document = json.loads(out)
    assert document["partition_engine"] == "numpy"
    expected = _in_process(frames, [(0,), (1,), (2,)], weights=False)
    np.testing.assert_allclose(list(document["coefficients"].values()), expected.coef_,
                               rtol=1e-10)
    import os

    assert os.environ["RH_DASK_PARTITION_ENGINE"] == "native_cpu"


def test_an_explicit_gpu_partition_engine_a_worker_cannot_run_is_one_error_line(
        dataset, address, capsys, monkeypatch, tmp_path):
    import sys

    _, paths = dataset
    monkeypatch.setitem(sys.modules, "cupy", None)  # this fixture's workers are threads here
    checkpoint = tmp_path / "never.npz"
    status, _, err = run(_cluster_fit(address, paths, "--partition-engine", "cupy",
                                      "--checkpoint", checkpoint), capsys)
    assert status == 1
    line = one_error_line(err)
    assert "partition engine 'cupy'" in line and "CuPy is not installed" in line
    assert not checkpoint.exists()


def test_partition_engine_without_dask_is_refused(dataset, capsys):
    _, paths = dataset
    status, _, err = run(["fit", paths[0], "--target", "y", "--partition-engine", "numpy"],
                         capsys)
    assert status == 2
    assert "--partition-engine needs --dask" in one_error_line(err)
