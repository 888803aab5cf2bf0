"""`fit --resume` without bookkeeping: the checkpoint's source record (validated strictly,
covered by the digest, absent from estimator.save() files), the rules that refuse to fold rows
in twice, the checkpoint cadence, and Ctrl-C printing the command that resumes. A resumed
or interrupted stream is compared with one uninterrupted run of the same batches."""

import hashlib
import json
import os
import shlex
import signal

import numpy as np
import pytest
from cli_support import one_error_line, run, write_csv

import renewable_huber.cli as cli
from renewable_huber import RenewableHuberRegressor
from renewable_huber import checkpoint as checkpoint_module
from renewable_huber.exceptions import ValidationError
from renewable_huber.simulation import simulate

FEATURES = ["a", "b", "c"]
N_ROWS = 6_000
BATCH = 1_000
COMMON = ["--target", "y", "--batch-size", BATCH, "--backend", "numpy", "--no-progress"]








@pytest.fixture(scope="module")
def dataset():
    return simulate(N_ROWS, len(FEATURES), seed=7)


@pytest.fixture()
def data_csv(tmp_path, dataset):
    return write_csv(tmp_path / "data.csv", dataset.X, dataset.y)


def expected_model(X, y, starts):
    model = RenewableHuberRegressor(backend="numpy")
    for start in starts:
        model.partial_fit(X[start:start + BATCH], y[start:start + BATCH])
    return model


def assert_same_state(path, model):
    saved = RenewableHuberRegressor.load(path)
    assert saved.state_.batch_count == model.state_.batch_count
    np.testing.assert_array_equal(saved.state_.coefficients, model.state_.coefficients)
    np.testing.assert_array_equal(saved.state_.information, model.state_.information)


def source_of(path):
    return checkpoint_module.load_checkpoint(path)["source"]


# Python's own SIGINT handler for every test here (conftest.interruptible).
pytestmark = pytest.mark.usefixtures("interruptible")


class StopAtBatch:
    """partial_fit that raises KeyboardInterrupt (or sends SIGINT to this process, as Ctrl-C
    does) when the stream reaches batch `number`."""

    def __init__(self, monkeypatch, number, *, signal_it):
        self.number, self.signal_it = number, signal_it
        real = RenewableHuberRegressor.partial_fit

        def partial_fit(model, X, y, sample_weight=None):
            batch = model.state_.batch_count + 1 if hasattr(model, "coef_") else 1
            if batch == self.number and not self.signal_it:
                raise KeyboardInterrupt
            result = real(model, X, y, sample_weight)
            if batch == self.number:
                os.kill(os.getpid(), signal.SIGINT)
            return result

        monkeypatch.setattr(RenewableHuberRegressor, "partial_fit", partial_fit)


# ------------------------------------------------------------------ the source record


def test_fit_records_the_file_and_the_rows_it_read(tmp_path, data_csv, capsys):
    checkpoint = tmp_path / "m.npz"
    assert run(["fit", data_csv, *COMMON, "--checkpoint", checkpoint], capsys)[0] == 0
    content = data_csv.read_bytes()
    assert source_of(checkpoint) == {
        "path": str(data_csv), "size": len(content), "prefix_bytes": len(content),
        "prefix_sha256": hashlib.sha256(content).hexdigest(), "rows": N_ROWS}


def test_estimator_save_writes_no_source_and_its_payload_keys_stay(tmp_path, dataset):
    model = expected_model(dataset.X, dataset.y, [0])
    model.save(tmp_path / "api.npz")
    payload = checkpoint_module.load_checkpoint(tmp_path / "api.npz")
    assert "source" not in payload
    assert payload.keys() == model.state_dict().keys()


def valid_record():
    return {"path": "/data/d.csv", "size": 100, "prefix_bytes": 40,
            "prefix_sha256": "ab" * 32, "rows": 3}


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (lambda r: r.pop("rows"), "exactly the keys"),
        (lambda r: r.update(extra=1), "exactly the keys"),
        (lambda r: r.update(path=""), "source.path"),
        (lambda r: r.update(path=7), "source.path"),
        (lambda r: r.update(path="a\0b"), "source.path"),
        (lambda r: r.update(path="x" * 4097), "source.path"),
        (lambda r: r.update(size=-1), "source.size"),
        (lambda r: r.update(size=2**63), "source.size"),
        (lambda r: r.update(prefix_bytes=0), "source.prefix_bytes"),
        (lambda r: r.update(prefix_bytes=101), "exceeds source.size"),
        (lambda r: r.update(prefix_bytes=True), "source.prefix_bytes"),
        (lambda r: r.update(prefix_sha256="AB" * 32), "prefix_sha256"),
        (lambda r: r.update(prefix_sha256="ab" * 31), "prefix_sha256"),
        (lambda r: r.update(rows=1.0), "source.rows"),
        (lambda r: r.update(rows=-3), "source.rows"),
    ],
)
def test_a_bad_source_record_is_refused_on_save_and_on_load(tmp_path, dataset, change, needle):
    model = expected_model(dataset.X, dataset.y, [0])
    record = valid_record()
    change(record)
    path = tmp_path / "m.npz"
    with pytest.raises(ValidationError, match=needle):
        checkpoint_module.save_checkpoint(path, model.state_dict(), source=record)
    assert not path.exists()
    # The same record written into a file with a matching digest is refused on load.
    checkpoint_module.save_checkpoint(path, model.state_dict(), source=valid_record())
    with np.load(path) as archive:
        arrays = {name: archive[name] for name in archive.files}
    metadata = json.loads(str(arrays["metadata"][()]))
    metadata["source"] = record
    metadata["payload_sha256"] = checkpoint_module.payload_digest(
        arrays["coefficients"], arrays["information"], metadata)
    np.savez(path, metadata=np.array(json.dumps(metadata)),
             coefficients=arrays["coefficients"], information=arrays["information"])
    with pytest.raises(ValidationError, match=f"invalid or corrupted checkpoint.*{needle}"):
        checkpoint_module.load_checkpoint(path)


def test_the_source_record_is_covered_by_the_digest_and_only_format_3_on_has_one(tmp_path,
                                                                                dataset):
    model = expected_model(dataset.X, dataset.y, [0])
    path = tmp_path / "m.npz"
    checkpoint_module.save_checkpoint(path, model.state_dict(), source=valid_record())
    assert checkpoint_module.load_checkpoint(path)["source"] == valid_record()
    with np.load(path) as archive:
        arrays = {name: archive[name] for name in archive.files}
    metadata = json.loads(str(arrays["metadata"][()]))
    metadata["source"]["rows"] = 0  # edited without a new digest
    np.savez(path, metadata=np.array(json.dumps(metadata)),
             **{name: array for name, array in arrays.items() if name != "metadata"})
    with pytest.raises(ValidationError, match="digest does not match"):
        checkpoint_module.load_checkpoint(path)
    metadata["format_version"] = 2
    del metadata["payload_sha256"]
    del metadata["has_meat"]
    del metadata["config"]["inference"], metadata["config"]["standardize"]
    del metadata["feature_scaling"]
    np.savez(path, metadata=np.array(json.dumps(metadata)),
             coefficients=arrays["coefficients"], information=arrays["information"])
    with pytest.raises(ValidationError, match=r"unexpected keys \['source'\]"):
        checkpoint_module.load_checkpoint(path)


# -------------------------------------------------------------------------- the rules


@pytest.fixture()
def interrupted(tmp_path, data_csv, capsys, monkeypatch):
    """A run of data.csv stopped by Ctrl-C during batch 4 (the batch finishes, then the
    checkpoint is written and the run stops): the checkpoint holds 4,000 rows."""
    checkpoint = tmp_path / "m.npz"
    StopAtBatch(monkeypatch, 4, signal_it=True)
    status, out, err = run(["fit", data_csv, *COMMON, "--checkpoint", checkpoint], capsys)
    monkeypatch.undo()
    assert status == 130, err
    assert source_of(checkpoint)["rows"] == 4 * BATCH
    return checkpoint, err


def test_ctrl_c_saves_after_the_batch_and_prints_the_command_that_resumes(
        interrupted, data_csv, dataset, capsys):
    checkpoint, err = interrupted
    line = one_error_line(err)
    command = line.split("resume with: ")[1]
    assert line.startswith(f"renewable-huber: error: interrupted after 4,000 rows of {data_csv} "
                           f"in 4 batches; {checkpoint} holds the first 4,000 data rows")
    assert command == (f"renewable-huber fit {data_csv} --target y --batch-size {BATCH} "
                       f"--backend numpy --checkpoint {checkpoint} --resume {checkpoint} "
                       "--no-progress")
    status, out, err = run(shlex.split(command)[1:], capsys)
    assert status == 0, err
    assert "2,000 rows in 2 batches" in out and "started after data row 4,000" in out
    assert_same_state(checkpoint, expected_model(dataset.X, dataset.y,
                                                 range(0, N_ROWS, BATCH)))


def test_ctrl_c_inside_a_batch_keeps_the_last_checkpoint_and_resumes_from_it(
        tmp_path, data_csv, dataset, capsys, monkeypatch):
    """KeyboardInterrupt raised inside partial_fit (a second Ctrl-C): the model may be half
    updated, so nothing is saved then; the checkpoint of batch 2 (every 2 batches) stays
    and the printed command continues from it."""
    checkpoint = tmp_path / "m.npz"
    StopAtBatch(monkeypatch, 4, signal_it=False)
    status, _, err = run(["fit", data_csv, *COMMON, "--checkpoint", checkpoint,
                          "--checkpoint-every", 2], capsys)
    monkeypatch.undo()
    assert status == 130
    line = one_error_line(err)
    assert f"{checkpoint} holds the first 2,000 data rows" in line
    assert source_of(checkpoint)["rows"] == 2 * BATCH
    status, out, err = run(shlex.split(line.split("resume with: ")[1])[1:], capsys)
    assert status == 0, err
    assert "started after data row 2,000" in out
    assert_same_state(checkpoint, expected_model(dataset.X, dataset.y,
                                                 range(0, N_ROWS, BATCH)))


def test_ctrl_c_without_a_checkpoint_says_nothing_was_saved(data_csv, capsys, monkeypatch):
    StopAtBatch(monkeypatch, 2, signal_it=True)
    status, _, err = run(["fit", data_csv, *COMMON], capsys)
    assert status == 130
    assert "nothing was saved (no --checkpoint)" in one_error_line(err)


def test_resuming_a_finished_file_has_nothing_new_and_changes_nothing(tmp_path, data_csv,
                                                                     capsys):
    checkpoint = tmp_path / "m.npz"
    assert run(["fit", data_csv, *COMMON, "--checkpoint", checkpoint], capsys)[0] == 0
    before = checkpoint.read_bytes()
    status, _, err = run(["fit", data_csv, *COMMON, "--resume", checkpoint, "--checkpoint",
                          checkpoint], capsys)
    assert status == 1
    assert f"nothing new to fit: {checkpoint} already holds all 6,000 data rows" in \
        one_error_line(err)
    assert checkpoint.read_bytes() == before


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--skip-rows", 3_999], "--skip-rows 3,999 would fold rows 4,000-4,000 of"),
        (["--skip-rows", 0], "--skip-rows 0 would fold rows 1-4,000 of"),
        (["--new-data"], "is not new data: it starts with the 4,000 rows"),
    ],
)
def test_counting_rows_twice_is_refused_and_the_checkpoint_stays(interrupted, data_csv,
                                                                 capsys, extra, needle):
    checkpoint, _ = interrupted
    before = checkpoint.read_bytes()
    status, out, err = run(["fit", data_csv, *COMMON, "--resume", checkpoint, *extra,
                            "--checkpoint", checkpoint], capsys)
    assert status == 1 and out == ""
    assert needle in one_error_line(err)
    assert checkpoint.read_bytes() == before


def test_skip_rows_beyond_the_recorded_rows_leaves_rows_out(interrupted, data_csv, dataset,
                                                            capsys):
    checkpoint, _ = interrupted
    status, _, err = run(["fit", data_csv, *COMMON, "--resume", checkpoint, "--skip-rows",
                          5_000, "--checkpoint", checkpoint], capsys)
    assert status == 0, err
    assert_same_state(checkpoint, expected_model(dataset.X, dataset.y,
                                                 [0, 1000, 2000, 3000, 5000]))
    assert source_of(checkpoint)["rows"] == N_ROWS


def test_another_file_needs_new_data_and_then_starts_at_its_first_row(
        interrupted, tmp_path, dataset, capsys):
    checkpoint, _ = interrupted
    other = write_csv(tmp_path / "other.csv", dataset.X[4_000:], dataset.y[4_000:])
    before = checkpoint.read_bytes()
    status, _, err = run(["fit", other, *COMMON, "--resume", checkpoint, "--checkpoint",
                          checkpoint], capsys)
    assert status == 1
    line = one_error_line(err)
    assert f"{other} is not the file {checkpoint} was fitted on" in line
    assert "add --new-data" in line
    assert checkpoint.read_bytes() == before
    status, out, err = run(["fit", other, *COMMON, "--resume", checkpoint, "--new-data",
                            "--checkpoint", checkpoint], capsys)
    assert status == 0, err
    assert "2,000 rows in 2 batches" in out
    assert_same_state(checkpoint, expected_model(dataset.X, dataset.y,
                                                 range(0, N_ROWS, BATCH)))
    assert source_of(checkpoint)["path"] == str(other)


def test_a_change_to_rows_already_read_is_detected_a_change_after_them_is_not(
        interrupted, data_csv, dataset, capsys):
    checkpoint, _ = interrupted
    # bytes, not text: the csv module ends lines with \r\n, which text mode would rewrite
    lines = data_csv.read_bytes().decode().splitlines(keepends=True)
    original = "".join(lines)
    lines[3_000] = lines[3_000].replace(",", ",1", 1)  # data row 3,000: already read
    data_csv.write_bytes("".join(lines).encode())
    status, _, err = run(["fit", data_csv, *COMMON, "--resume", checkpoint], capsys)
    assert status == 1
    assert "differs in its first" in one_error_line(err)
    lines = original.splitlines(keepends=True)
    X = dataset.X.copy()
    X[5_500, 0] = 0.25  # data row 5,501: not read yet, so the resumed run sees the edit
    lines[5_501] = ",".join([repr(0.25)] + lines[5_501].split(",")[1:])
    data_csv.write_bytes("".join(lines).encode())
    status, _, err = run(["fit", data_csv, *COMMON, "--resume", checkpoint, "--checkpoint",
                          checkpoint], capsys)
    assert status == 0, err
    assert_same_state(checkpoint, expected_model(X, dataset.y, range(0, N_ROWS, BATCH)))


def test_a_checkpoint_without_a_source_resumes_at_row_one_or_skip_rows(
        tmp_path, data_csv, dataset, capsys):
    api = tmp_path / "api.npz"
    expected_model(dataset.X, dataset.y, [0, 1000]).save(api)
    status, _, err = run(["fit", data_csv, *COMMON, "--resume", api, "--skip-rows", 2_000,
                          "--checkpoint", tmp_path / "out.npz"], capsys)
    assert status == 0, err
    assert_same_state(tmp_path / "out.npz", expected_model(dataset.X, dataset.y,
                                                           range(0, N_ROWS, BATCH)))


def test_parquet_sources_resume_too(tmp_path, dataset, capsys, monkeypatch):
    pa = pytest.importorskip("pyarrow", reason="the parquet extra (pyarrow) is not installed")
    import pyarrow.parquet as pq

    columns = {name: dataset.X[:, j] for j, name in enumerate(FEATURES)}
    columns["y"] = dataset.y
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table(columns), path, row_group_size=1_500)
    checkpoint = tmp_path / "m.npz"
    StopAtBatch(monkeypatch, 3, signal_it=True)
    assert run(["fit", path, *COMMON, "--checkpoint", checkpoint], capsys)[0] == 130
    monkeypatch.undo()
    assert source_of(checkpoint)["rows"] == 3 * BATCH
    assert source_of(checkpoint)["prefix_bytes"] == min(path.stat().st_size, 1 << 16)
    status, out, err = run(["fit", path, *COMMON, "--resume", checkpoint, "--checkpoint",
                            checkpoint], capsys)
    assert status == 0, err
    assert "started after data row 3,000" in out
    assert_same_state(checkpoint, expected_model(dataset.X, dataset.y,
                                                 range(0, N_ROWS, BATCH)))
    other = tmp_path / "o.parquet"
    pq.write_table(pa.table({k: v[::-1].copy() for k, v in columns.items()}), other)
    status, _, err = run(["fit", other, *COMMON, "--resume", checkpoint], capsys)
    assert status == 1 and "is not the file" in one_error_line(err)


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--new-data"], "--new-data only applies with --resume"),
        (["--checkpoint-every", 2], "--checkpoint-every needs --checkpoint"),
        (["--checkpoint-seconds", 5], "--checkpoint-seconds needs --checkpoint"),
    ],
)
def test_option_combinations_are_usage_errors(data_csv, capsys, argv, needle):
    status, _, err = run(["fit", data_csv, *COMMON, *argv], capsys)
    assert status == 2
    assert needle in one_error_line(err)


@pytest.mark.parametrize("option", [["--lambda-scale", "2"], ["--no-intercept"],
                                    ["--penalty", "l1"], ["--tau", "2"]])
def test_resume_refuses_the_options_the_checkpoint_fixes(interrupted, data_csv, capsys,
                                                         option):
    checkpoint, _ = interrupted
    before = checkpoint.read_bytes()
    status, _, err = run(["fit", data_csv, *COMMON, "--resume", checkpoint, *option,
                          "--checkpoint", checkpoint], capsys)
    assert status == 2
    assert option[0] in one_error_line(err) and "--resume" in err
    assert checkpoint.read_bytes() == before


# ------------------------------------------------------------------------ the cadence


class FakeClock:
    """time.monotonic for the CLI that advances 10 s with every batch fitted."""

    def __init__(self, monkeypatch):
        import time

        self.now = 0.0
        real = RenewableHuberRegressor.partial_fit

        def partial_fit(model, *a, **k):
            self.now += 10.0
            return real(model, *a, **k)

        monkeypatch.setattr(RenewableHuberRegressor, "partial_fit", partial_fit)
        fake_time = type("FakeTime", (), {"monotonic": lambda _: self.now,
                                          "perf_counter": staticmethod(time.perf_counter)})()
        monkeypatch.setattr(cli, "time", fake_time)


@pytest.fixture()
def saves(monkeypatch):
    """The rows recorded by every checkpoint write, in order."""
    written = []
    real = checkpoint_module.save_checkpoint

    def save(path, payload, *, source=None):
        written.append(source["rows"])
        return real(path, payload, source=source)

    monkeypatch.setattr(checkpoint_module, "save_checkpoint", save)
    return written


@pytest.mark.parametrize(
    ("options", "rows"),
    [
        ([], [3_000, 6_000]),  # every 30 s by default: batches 3 and 6 (10 s each)
        (["--checkpoint-seconds", 45], [5_000, 6_000]),
        (["--checkpoint-seconds", 0], [6_000]),
        (["--checkpoint-every", 2], [2_000, 4_000, 6_000]),
        (["--checkpoint-every", 4], [4_000, 6_000]),
        (["--checkpoint-every", 0], [6_000]),
        (["--checkpoint-every", 4, "--checkpoint-seconds", 25], [3_000, 6_000]),
    ],
)
def test_checkpoint_cadence(tmp_path, data_csv, capsys, monkeypatch, saves, options, rows):
    FakeClock(monkeypatch)
    status, out, err = run(["fit", data_csv, *COMMON, "--checkpoint", tmp_path / "m.npz",
                            *options], capsys)
    assert status == 0, err
    assert saves == rows
    assert f"written {len(rows)} time" in out


def test_a_bad_row_writes_no_checkpoint_beyond_the_cadence(tmp_path, dataset, capsys,
                                                            monkeypatch, saves):
    """Batches 1-3 are saved by the 30 s cadence; row 4,500 is bad: the error says what the
    checkpoint holds and nothing else is written."""
    FakeClock(monkeypatch)
    X = dataset.X.copy()
    X[4_499, 2] = np.inf
    path, checkpoint = write_csv(tmp_path / "bad.csv", X, dataset.y), tmp_path / "m.npz"
    status, _, err = run(["fit", path, *COMMON, "--checkpoint", checkpoint], capsys)
    assert status == 1
    line = one_error_line(err)
    assert f"{path} line 4501: column 'c' holds 'inf'" in line
    assert f"{checkpoint} holds the first 3,000 data rows of {path}" in line
    assert saves == [3_000]
