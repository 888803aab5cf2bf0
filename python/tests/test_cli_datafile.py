"""Chunked reading of data files for the command line: chunk boundaries, the schema rule
(numeric = a finite number in the first data row), column selection, encodings, binary and
empty files, Parquet, and the errors that name the file, line and column. The fingerprints a
table reports are checked against hashlib run on the file's own bytes."""

import csv
import hashlib

import numpy as np
import pytest
from cli_support import one_error_line, run

from renewable_huber.datafile import DataFileError, open_table, select_columns


def write(tmp_path, text, name="t.csv"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)






def read_all(table, columns, skip=0):
    chunks = list(table.batches(columns, skip=skip))
    table.close()
    return chunks


def test_chunks_have_the_requested_size_and_report_their_lines(tmp_path):
    rows = "\n".join(f"{i},{2 * i}" for i in range(7))
    chunks = read_all(open_table(write(tmp_path, "x,y\n" + rows + "\n"), chunk_rows=3),
                      ["y", "x"])
    assert [(c.first, c.last, c.rows_through) for c in chunks] == [(2, 4, 3), (5, 7, 6),
                                                                     (8, 8, 7)]
    stacked = np.vstack([c.values for c in chunks])
    np.testing.assert_array_equal(stacked, np.column_stack([2 * np.arange(7), np.arange(7)]))
    assert stacked.dtype == np.float64


def test_skipping_keeps_chunks_aligned_to_the_file(tmp_path):
    """After skipping 4 rows with chunks of 3, the first chunk is the rest of the second
    chunk (row 5 and 6), then whole chunks: the batches an uninterrupted run would have."""
    rows = "\n".join(f"{i}" for i in range(10))
    chunks = read_all(open_table(write(tmp_path, "x\n" + rows + "\n"), chunk_rows=3), ["x"],
                      skip=4)
    assert [c.values[:, 0].tolist() for c in chunks] == [[4, 5], [6, 7, 8], [9]]
    assert [c.rows_through for c in chunks] == [6, 9, 10]


def test_values_round_trip_exactly(tmp_path):
    values = [0.1, -1e-300, 123456789.123456789, 2.0 ** -52]
    text = "v\n" + "\n".join(repr(v) for v in values) + "\n"
    (chunk,) = read_all(open_table(write(tmp_path, text), chunk_rows=10), ["v"])
    assert chunk.values[:, 0].tolist() == values


def test_the_first_data_row_decides_which_columns_are_numeric(tmp_path):
    table = open_table(write(tmp_path, "id,name,empty,inf,y\n1,ann,,inf,2.5\n2,3,4,5,3e1\n"),
                       10)
    assert table.numeric_columns == ["id", "y"]
    assert dict(table.not_numeric()) == {"name": "'ann' in line 2", "empty": "empty in line 2",
                                         "inf": "'inf' in line 2"}
    table.close()


def test_blank_lines_are_skipped_and_do_not_count_as_rows(tmp_path):
    chunks = read_all(open_table(write(tmp_path, "a\n1\n\n2\n3\n"), 2), ["a"])
    assert [c.values[:, 0].tolist() for c in chunks] == [[1.0, 2.0], [3.0]]
    assert [(c.first, c.last) for c in chunks] == [(2, 4), (5, 5)]


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ("", ["empty", "header"]),
        ("a,b\n", ["has a header row but no data rows"]),
        ("a,b\n\n\n", ["has a header row but no data rows"]),
        ("a,a\n1,2\n", ["'a'", "twice"]),
        ("a, a\n1,2\n", ["'a'", "twice"]),
    ],
)
def test_unusable_csv_files_are_refused_when_opened(tmp_path, text, needles):
    with pytest.raises(DataFileError) as info:
        open_table(write(tmp_path, text), 10)
    for needle in ["t.csv", *needles]:
        assert needle in str(info.value)


def test_a_row_with_the_wrong_field_count_names_its_line(tmp_path):
    table = open_table(write(tmp_path, "a,b\n1,2\n3\n"), 10)
    with pytest.raises(DataFileError, match=r"t.csv line 3: 1 fields, but the header has 2"):
        read_all(table, ["a"])


def test_missing_value_in_a_later_chunk_names_line_and_column(tmp_path):
    table = open_table(write(tmp_path, "a,b\n1,2\n3,4\n5,\n"), chunk_rows=2)
    batches = table.batches(["a", "b"])
    next(batches)
    with pytest.raises(DataFileError, match=r"line 4: missing value in column 'b'"):
        next(batches)
    table.close()


def test_suffix_and_existence_are_checked_before_reading(tmp_path):
    with pytest.raises(FileNotFoundError):
        open_table(str(tmp_path / "absent.csv"), 10)
    with pytest.raises(DataFileError, match="unsupported file type '.json'"):
        open_table(write(tmp_path, "{}", name="t.json"), 10)
    with pytest.raises(DataFileError, match="not a regular file"):
        open_table(str(tmp_path), 10)


@pytest.fixture()
def table(tmp_path):
    opened = open_table(write(tmp_path, "a,b,label,w,y\n1,2,x,0.5,3\n"), 10)
    yield opened
    opened.close()


def test_default_features_are_the_numeric_columns_but_target_and_weight(table):
    assert select_columns(table, target="y", features=None) == ["a", "b", "w"]
    assert select_columns(table, target="y", features=None, weight="w") == ["a", "b"]
    assert select_columns(table, target=None, features=None) == ["a", "b", "w", "y"]
    assert select_columns(table, target="y", features=["b"]) == ["b"]


@pytest.mark.parametrize(
    ("target", "features", "weight", "needle"),
    [
        ("nope", None, None, "no column 'nope'"),
        ("y", None, "nope", "no column 'nope'"),
        ("y", ["a", "a"], None, "twice"),
        ("y", ["a", "y"], None, "must not include the target"),
        ("y", ["a", "w"], "w", "must not include the weight column"),
        ("y", None, "y", "is the target column"),
        ("y", ["label"], None, r"line 2: column 'label' holds 'x', which is not a number"),
        ("label", None, None, r"line 2: column 'label' holds 'x', which is not a number"),
        ("y", None, "label", r"line 2: column 'label' holds 'x', which is not a number"),
    ],
)
def test_bad_column_choices_are_refused(table, target, features, weight, needle):
    with pytest.raises(DataFileError, match=needle):
        select_columns(table, target=target, features=features, weight=weight)


def test_a_file_with_only_the_target_has_no_features(tmp_path):
    only_target = open_table(write(tmp_path, "y,name\n1,x\n"), 10)
    with pytest.raises(DataFileError, match="no numeric feature columns"):
        select_columns(only_target, target="y", features=None)
    only_target.close()


# ------------------------------------------------------- the schema does not move with -B


def numeric_csv(path, n_rows, bad_row=None, bad_value="abc"):
    """Columns a, b, y; data row `bad_row` (1-based) holds `bad_value` in column b."""
    rng = np.random.default_rng(0)
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["a", "b", "y"])
        for i in range(1, n_rows + 1):
            a, b = rng.standard_normal(2).tolist()
            writer.writerow([repr(a), bad_value if i == bad_row else repr(b), repr(a - b)])
    return path


@pytest.mark.parametrize("batch_size", [10, 1_000, 1_499, 1_500, 5_000, 10_000])
@pytest.mark.parametrize("bad_value", ["abc", "", "nan", "-inf"])
def test_a_bad_cell_in_a_feature_column_is_an_error_whatever_the_batch_size(
        tmp_path, capsys, batch_size, bad_value):
    """Row 1,500 of column b is not a finite number: every batch size gives the same error
    (file, line 1,501, column, value) and exit status 1. Before, a batch of 5,000 saw the
    bad cell while inferring types and silently dropped the whole column."""
    path = numeric_csv(tmp_path / "d.csv", 3_000, bad_row=1_500, bad_value=bad_value)
    status, out, err = run(["fit", path, "--target", "y", "--batch-size", batch_size,
                            "--backend", "numpy", "--no-progress"], capsys)
    assert status == 1
    assert out == ""
    line = one_error_line(err)
    assert f"{path} line 1501" in line and "column 'b'" in line
    if bad_value:
        assert f"holds {bad_value!r}" in line
    else:
        assert "missing value" in line


def test_left_out_columns_are_listed_once_on_stderr(tmp_path, capsys):
    path = tmp_path / "d.csv"
    path.write_text(",a,note,empty,y\n0,1.5,hello,,1\n1,2.5,world,3,2\n2,0.5,x,4,0.5\n")
    status, out, err = run(["fit", path, "--target", "y", "--backend", "numpy",
                            "--no-progress"], capsys)
    assert status == 0, err
    notes = [line for line in err.splitlines() if line.startswith("renewable-huber: note:")]
    assert notes == [f"renewable-huber: note: {path}: not numeric, left out of the features: "
                     "(column 1) (no name in the header), note ('hello' in line 2), empty "
                     "(empty in line 2)"]
    # the unnamed first column (a pandas index) is not a feature either
    assert "feature" in out and "\na " in out and "note" not in out
    status, _, err = run(["fit", path, "--target", "y", "--features", "a", "--backend",
                          "numpy", "--no-progress"], capsys)
    assert status == 0 and "note:" not in err


# ------------------------------------------------------------- encodings and binary files


def test_a_utf8_byte_order_mark_is_not_part_of_the_first_column_name(tmp_path, capsys):
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbfy,a\n1,2\n2,3\n4,1\n")
    table = open_table(str(path), 10)
    assert table.columns == ["y", "a"]
    table.close()
    status, out, err = run(["fit", path, "--target", "y", "--backend", "numpy",
                            "--no-progress"], capsys)
    assert status == 0, err
    assert "3 rows in 1 batches" in out


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"PAR1" + bytes(64), "it is a Parquet file: give it the .parquet suffix"),
        (b"\x1f\x8b\x08\x00" + bytes(32), "gzip-compressed"),
        (b"PK\x03\x04" + bytes(32), "zip archive"),
        ("y,a\n1,2\n".encode("utf-16"), "UTF-16"),
        (b"y,a\n1,2\n3,\x00\x01\x02\n", "binary data (a NUL byte at offset 10)"),
    ],
)
def test_binary_files_get_one_line_naming_the_file(tmp_path, capsys, content, needle):
    path = tmp_path / "data.csv"
    path.write_bytes(content)
    status, _, err = run(["fit", path, "--target", "y"], capsys)
    assert status == 1
    line = one_error_line(err)
    assert str(path) in line and needle in line


def test_undecodable_text_names_its_line(tmp_path, capsys):
    path = tmp_path / "latin1.csv"
    path.write_bytes(b"y,a\n1,2\n2,3\n3,caf\xe9\n")
    status, _, err = run(["fit", path, "--target", "y", "--no-progress"], capsys)
    assert status == 1
    line = one_error_line(err)
    assert f"{path} line 4: not UTF-8 text (byte 0xe9" in line


@pytest.mark.parametrize(
    ("text", "needle"),
    [("y,a\n", "has a header row but no data rows"), ("", "is empty"),
     ("y,a,a\n1,2,3\n", "column name 'a' appears twice")],
)
def test_empty_and_duplicate_header_files_get_one_line(tmp_path, capsys, text, needle):
    path = write(tmp_path, text, name="d.csv")
    for command in (["fit", path, "--target", "y"], ["predict", path, path]):
        status, _, err = run(command, capsys)
        assert status == 1
        line = one_error_line(err)
        assert path in line and needle in line


# ---------------------------------------------------------------------------- fingerprints


def test_source_record_fingerprints_the_bytes_through_the_last_row_read(tmp_path):
    text = "a,y\n" + "".join(f"{i},{i * i}\n" for i in range(10))
    path = write(tmp_path, text)
    table = open_table(path, 4)
    chunks = table.batches(["a", "y"])
    assert table.source_record(0)["prefix_bytes"] == len("a,y\n")
    next(chunks)
    record = table.source_record(4)
    consumed = ("a,y\n" + "".join(f"{i},{i * i}\n" for i in range(4))).encode()
    assert record["prefix_bytes"] == len(consumed)
    assert record["prefix_sha256"] == hashlib.sha256(consumed).hexdigest()
    assert record["rows"] == 4 and record["size"] == len(text)
    table.close()
    # A file that starts with those bytes (rows appended) is the same source and continues
    # after row 4; one with a consumed row changed is not.
    appended = write(tmp_path, text + "10,100\n", name="appended.csv")
    other = write(tmp_path, text.replace("2,4\n", "2,5\n"), name="edited.csv")
    later = write(tmp_path, text.replace("7,49\n", "7,50\n"), name="edited_later.csv")
    for name, same in ((appended, True), (other, False), (later, True)):
        table = open_table(name, 4)
        assert table.resume_at(record) is same, name
        if same:
            chunks = list(table.batches(["a"]))
            assert chunks[0].first == 6 and chunks[0].values[0, 0] == 4.0
        table.close()


# --------------------------------------------------------------------------------- Parquet


@pytest.fixture()
def pa():
    return pytest.importorskip("pyarrow", reason="the parquet extra (pyarrow) is not installed")


def write_parquet(pa, path, columns, row_group_size=None):
    import pyarrow.parquet as pq

    pq.write_table(pa.table(columns), path, row_group_size=row_group_size)
    return str(path)


def test_parquet_chunks_are_aligned_across_row_groups_and_after_a_skip(pa, tmp_path):
    path = write_parquet(pa, tmp_path / "t.parquet", {"x": np.arange(10.0)}, row_group_size=4)
    chunks = read_all(open_table(path, 3), ["x"])
    assert [c.values[:, 0].tolist() for c in chunks] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert [(c.first, c.last, c.rows_through) for c in chunks] == [(1, 3, 3), (4, 6, 6),
                                                                     (7, 9, 9), (10, 10, 10)]
    chunks = read_all(open_table(path, 3), ["x"], skip=5)
    assert [c.values[:, 0].tolist() for c in chunks] == [[5], [6, 7, 8], [9]]
    assert read_all(open_table(path, 3), ["x"], skip=10) == []


@pytest.mark.parametrize(
    ("values", "needle"),
    [([1.0, 2.0, None, 4.0], "row 3: missing value (null) in column 'x'"),
     ([1.0, 2.0, 3.0, float("nan")], "row 4: column 'x' holds nan, which is not a finite")],
)
def test_parquet_nulls_and_non_finite_values_name_the_row(pa, tmp_path, values, needle):
    path = write_parquet(pa, tmp_path / "t.parquet",
                         {"x": pa.array(values, type=pa.float64()), "y": np.ones(4)},
                         row_group_size=2)
    table = open_table(path, 2)
    with pytest.raises(DataFileError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        read_all(table, ["x", "y"])


def test_parquet_text_columns_are_listed_and_empty_or_foreign_files_refused(pa, tmp_path,
                                                                             capsys):
    path = write_parquet(pa, tmp_path / "t.parquet",
                         {"a": np.arange(5.0), "label": list("abcde"), "y": np.arange(5.0)})
    status, _, err = run(["fit", path, "--target", "y", "--backend", "numpy",
                          "--no-progress"], capsys)
    assert status == 0, err
    assert (f"renewable-huber: note: {path}: not numeric, left out of the features: label "
            "(type string)") in err
    empty = write_parquet(pa, tmp_path / "empty.parquet",
                          {"a": pa.array([], pa.float64()), "y": pa.array([], pa.float64())})
    text = write(tmp_path, "y,a\n1,2\n", name="text.parquet")
    for name, needle in ((empty, "has a schema but no data rows"),
                         (text, "is not a readable Parquet file")):
        status, _, err = run(["fit", name, "--target", "y"], capsys)
        assert status == 1
        line = one_error_line(err)
        assert name in line and needle in line
