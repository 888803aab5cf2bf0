"""`renewable-huber fit --dask`: a Parquet dataset streamed in batches of partitions read on
the workers of a local cluster equals the in-process stream of the same batches."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from cli_support import one_error_line, run

from renewable_huber import RenewableHuberRegressor
from renewable_huber.checkpoint import load_checkpoint

pytest.importorskip("distributed", reason="dask.distributed is not installed (pip install "
                    "'.[dask]')")
pytest.importorskip("dask.dataframe", reason="dask[dataframe] is not installed")
pytest.importorskip("pyarrow", reason="reading Parquet needs pyarrow")

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
        (["--skip-rows", "10"], "--skip-rows cannot be combined with --dask"),
        (["--resume", "x.npz", "--tau", "1"], "--tau cannot be combined with --resume"),
        (["--batch-size", "10"], "--batch-size cannot be combined with --dask"),
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


def _cluster_fit(paths, *extra):
    return ["fit", "--dask", "local:1", *map(str, paths), "--target", "y", "--features",
            "a,b,c", "--backend", "numpy", "--partitions-per-batch", "1", "--no-progress",
            *map(str, extra)]


def _interrupted_after_two_batches(paths, checkpoint, capsys, monkeypatch):
    """A fit of the three partitions with Ctrl-C during the third batch."""
    from renewable_huber.dask import command

    fit_one_batch, calls = command._fit_one_batch, []

    def interrupted_at_the_third_batch(*args):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return fit_one_batch(*args)

    monkeypatch.setattr(command, "_fit_one_batch", interrupted_at_the_third_batch)
    status, _, err = run(_cluster_fit(paths, "--checkpoint", checkpoint), capsys)
    assert status == 130, err
    held = RenewableHuberRegressor.load(checkpoint)
    assert held.state_.batch_count == 2 and held.n_samples_seen_ == 600
    monkeypatch.setattr(command, "_fit_one_batch", fit_one_batch)


def test_resume_after_an_interruption_equals_the_uninterrupted_stream(dataset, capsys,
                                                                      tmp_path, monkeypatch):
    frames, paths = dataset
    checkpoint = tmp_path / "model.npz"
    _interrupted_after_two_batches(paths, checkpoint, capsys, monkeypatch)
    status, out, err = run(_cluster_fit(paths, "--resume", checkpoint, "--checkpoint",
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
    status, _, err = run(_cluster_fit(paths, "--resume", checkpoint), capsys)
    assert status == 1
    assert "nothing new to fit" in one_error_line(err)


def test_resume_on_another_dataset_is_refused(dataset, capsys, tmp_path):
    _, paths = dataset
    checkpoint = tmp_path / "model.npz"
    status, _, err = run(_cluster_fit(paths[:2], "--checkpoint", checkpoint), capsys)
    assert status == 0, err
    before = checkpoint.read_bytes()
    status, _, err = run(_cluster_fit(paths, "--resume", checkpoint, "--checkpoint",
                                      checkpoint), capsys)
    assert status == 1
    assert "is not the dataset" in one_error_line(err)
    assert checkpoint.read_bytes() == before  # refused before any batch: nothing written


def test_resume_of_a_single_file_checkpoint_with_dask_is_refused(dataset, capsys, tmp_path):
    frames, paths = dataset
    checkpoint = tmp_path / "model.npz"
    status, _, err = run(["fit", str(paths[0]), "--target", "y", "--features", "a,b,c",
                          "--backend", "numpy", "--checkpoint", checkpoint, "--no-progress"],
                         capsys)
    assert status == 0, err
    status, _, err = run(_cluster_fit(paths, "--resume", checkpoint), capsys)
    assert status == 1
    assert "not on a dataset with --dask" in one_error_line(err)


def test_strict_stops_at_the_first_unconverged_batch_keeping_the_converged_checkpoint(
        dataset, capsys, tmp_path, monkeypatch):
    frames, paths = dataset
    checkpoint = tmp_path / "model.npz"
    # A fresh stream whose first batch cannot converge in one iteration: exit 3, no file.
    status, _, err = run(_cluster_fit(paths, "--strict", "--max-iter", "1", "--checkpoint",
                                      checkpoint), capsys)
    assert status == 3, err
    line = one_error_line(err)
    assert "batch 1 (partitions 0-0 of 3) did not converge" in line
    assert "not written: no batch of this stream converged" in line
    assert not checkpoint.exists()

    # Two converged batches (a run interrupted before its third), then the third held to one
    # iteration: exit 3, and the checkpoint keeps the two converged batches and the count of
    # partitions they hold.
    _interrupted_after_two_batches(paths, checkpoint, capsys, monkeypatch)
    two = RenewableHuberRegressor.load(checkpoint)
    status, _, err = run(_cluster_fit(paths, "--resume", checkpoint, "--checkpoint",
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
