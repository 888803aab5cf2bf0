"""Chunked CSV reading for the command line: chunk boundaries, type inference, column
selection and the errors that name the file, line and column."""

import numpy as np
import pytest
from renewable_huber.datafile import DataFileError, open_table, select_columns


def write(tmp_path, text, name="t.csv"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_chunks_have_the_requested_size_and_report_their_lines(tmp_path):
    rows = "\n".join(f"{i},{2 * i}" for i in range(7))
    table = open_table(write(tmp_path, "x,y\n" + rows + "\n"), chunk_rows=3)
    chunks = list(table.batches(["y", "x"]))
    table.close()
    assert [(first, last) for first, last, _ in chunks] == [(2, 4), (5, 7), (8, 8)]
    stacked = np.vstack([block for _, _, block in chunks])
    np.testing.assert_array_equal(stacked, np.column_stack([2 * np.arange(7), np.arange(7)]))
    assert stacked.dtype == np.float64


def test_values_round_trip_exactly(tmp_path):
    values = [0.1, -1e-300, 123456789.123456789, 2.0 ** -52]
    text = "v\n" + "\n".join(repr(v) for v in values) + "\n"
    table = open_table(write(tmp_path, text), chunk_rows=10)
    (_, _, block), = table.batches(["v"])
    table.close()
    assert block[:, 0].tolist() == values


def test_type_inference_keeps_numeric_columns_and_reports_why_others_are_not(tmp_path):
    table = open_table(write(tmp_path, "id,name,empty,y\n1,ann,,2.5\n2,bob,,3e1\n"), 10)
    assert table.numeric_columns == ["id", "y"]
    assert "'ann'" in table.why_not_numeric("name")
    assert "no values" in table.why_not_numeric("empty")
    table.close()


def test_blank_lines_are_skipped(tmp_path):
    table = open_table(write(tmp_path, "a\n1\n\n2\n"), 10)
    (_, _, block), = table.batches(["a"])
    table.close()
    assert block[:, 0].tolist() == [1.0, 2.0]


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ("", ["empty", "header"]),
        ("a,a\n1,2\n", ["'a'", "twice"]),
        ("a,b\n1,2\n3\n", ["line 3", "1 fields", "header has 2"]),
    ],
)
def test_malformed_csv_is_refused_with_its_line(tmp_path, text, needles):
    with pytest.raises(DataFileError) as info:
        open_table(write(tmp_path, text), 10)
    for needle in needles:
        assert needle in str(info.value)


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
    opened = open_table(write(tmp_path, "a,b,label,y\n1,2,x,3\n"), 10)
    yield opened
    opened.close()


def test_default_features_are_the_numeric_columns_but_the_target(table):
    assert select_columns(table, target="y", features=None) == ["a", "b"]
    assert select_columns(table, target=None, features=None) == ["a", "b", "y"]
    assert select_columns(table, target="y", features=["b"]) == ["b"]


@pytest.mark.parametrize(
    ("target", "features", "needle"),
    [
        ("nope", None, "no column 'nope'"),
        ("y", ["a", "a"], "twice"),
        ("y", ["a", "y"], "must not include the target"),
        ("y", ["label"], "'label' is not numeric"),
    ],
)
def test_bad_column_choices_are_refused(table, target, features, needle):
    with pytest.raises(DataFileError, match=needle):
        select_columns(table, target=target, features=features)


def test_a_file_with_only_the_target_has_no_features(tmp_path):
    only_target = open_table(write(tmp_path, "y,name\n1,x\n"), 10)
    with pytest.raises(DataFileError, match="no numeric feature columns"):
        select_columns(only_target, target="y", features=None)
    only_target.close()
