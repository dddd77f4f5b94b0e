"""The pure readers on small fixture files: good records, and every bad-input case naming file and line."""

from __future__ import annotations

import gzip
import lzma
from pathlib import Path

import lz4.frame
import pytest

from cdgt.components.formats import arff, csv_format, debian, xmc
from cdgt.components.formats.errors import RecordError, SourceError, find_record_message
from cdgt.components.formats.record import Record, labels_of_tf_example, to_tf_example
from cdgt.components.formats.splits import carve_validation, catalogue_split, split_hint, unit_hash
from cdgt.components.formats.textio import numbered_lines

XML = (
    '<?xml version="1.0"?><labels xmlns="http://mulan.sourceforge.net/labels">'
    '<label name="L2"></label><label name="L1"></label></labels>'
)
DENSE = (
    "@relation r\n% comment\n@attribute a numeric\n@attribute 'b c' numeric\n"
    "@attribute L1 {0,1}\n@attribute L2 {0,1}\n\n@data\n0.5,1,1,0\n-1,2e3,0,0\n"
)


def _header() -> arff.ArffHeader:
    lines = enumerate(DENSE.splitlines(), 1)
    return arff.parse_header(lines, arff.parse_label_xml(XML), "t.arff")


def _bad(call, reason: str, file: str = "t.arff", line: int = 9) -> RecordError:
    with pytest.raises(RecordError) as info:
        call()
    err = info.value
    assert (err.reason, err.file, err.where) == (reason, file, line), str(err)
    assert f"{file}:{line}:" in str(err)
    return err


def test_arff_header_and_dense_line():
    header = _header()
    assert header.attributes == ("a", "b c", "L1", "L2") and header.num_features == 2
    assert header.label_names == ("L1", "L2") and header.data_line == 8
    record = arff.parse_line("0.5,1,1,0", header, "t.arff", 9)
    assert record.dense == (0.5, 1.0) and record.labels == (0,)
    assert arff.parse_line("-1,2e3,0,0", header, "t.arff", 10).labels == ()  # empty label set is valid


def test_arff_sparse_line():
    header = _header()
    record = arff.parse_line("{1 2.5,2 1,3 1}", header, "t.arff", 9)
    assert record.feature_ids == (1,) and record.feature_values == (2.5,) and record.labels == (0, 1)
    assert arff.parse_line("{}", header, "t.arff", 9).labels == ()


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("0.5,1,1", "wrong_field_count"),
        ("x,1,1,0", "non_numeric"),
        ("nan,1,1,0", "non_finite"),
        ("inf,1,1,0", "non_finite"),
        ("0,1,2,0", "bad_label_value"),
        ("{4 1}", "feature_id_out_of_range"),
        ("{0 1,0 2}", "duplicate_feature"),
        ("{0 abc}", "non_numeric"),
        ("{0 1", "wrong_field_count"),
        ("{0}", "wrong_field_count"),
    ],
)
def test_arff_bad_lines(line: str, reason: str):
    _bad(lambda: arff.parse_line(line, _header(), "t.arff", 9), reason)


def test_arff_header_must_end_with_the_xml_labels():
    bad = DENSE.replace("@attribute L2", "@attribute Other")
    with pytest.raises(SourceError, match=r"t\.arff"):
        arff.parse_header(enumerate(bad.splitlines(), 1), ["L1", "L2"], "t.arff")
    with pytest.raises(SourceError, match="no @data"):
        arff.parse_header(enumerate(DENSE.split("@data")[0].splitlines(), 1), ["L1", "L2"], "t.arff")


def test_xmc_lines():
    header = xmc.parse_header("3 10 4", "train.txt")
    assert header == xmc.XmcHeader(3, 10, 4)
    record = xmc.parse_line("0,3 1:0.5 9:2", header, "train.txt", 2)
    assert record.labels == (0, 3) and record.feature_ids == (1, 9) and record.feature_values == (0.5, 2.0)
    assert xmc.parse_line(" 4:1", header, "train.txt", 3).labels == ()
    assert xmc.parse_line("2", header, "train.txt", 4).feature_ids == ()


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("4 1:1", "label_id_out_of_range"),
        ("1,1 1:1", "duplicate_label"),
        ("1 10:1", "feature_id_out_of_range"),
        ("1 2:x", "non_numeric"),
        ("1 2:nan", "non_finite"),
        ("1 2:1 2:3", "duplicate_feature"),
        ("1 2", "wrong_field_count"),
        ("a 2:1", "non_numeric"),
        ("", "blank_line"),
    ],
)
def test_xmc_bad_lines(line: str, reason: str):
    header = xmc.parse_header("3 10 4", "train.txt")
    _bad(lambda: xmc.parse_line(line, header, "train.txt", 5), reason, "train.txt", 5)


def test_xmc_header_errors():
    _bad(lambda: xmc.parse_header("3 10", "train.txt"), "bad_header", "train.txt", 1)
    err = xmc.count_mismatch("train.txt", xmc.XmcHeader(3, 10, 4), 2)
    assert err is not None and err.reason == "header_count_mismatch" and "train.txt:1:" in str(err)
    assert xmc.count_mismatch("train.txt", xmc.XmcHeader(2, 10, 4), 2) is None


def test_csv_rows():
    layout = csv_format.CsvLayout.from_header(["id", "x", "y", "labels"], "t.csv", id_column="id")
    record = csv_format.parse_row(["p1", "1", "2.5", "cat|dog"], layout, "t.csv", 2)
    assert record == Record("p1", "", ("cat", "dog"), dense=(1.0, 2.5))
    assert csv_format.parse_row(["p2", "1", "2", ""], layout, "t.csv", 3).labels == ()
    vocab = {"cat": 0, "dog": 1}
    assert csv_format.parse_row(["p1", "1", "2", "dog"], layout, "t.csv", 2, vocab).labels == (1,)
    ids = csv_format.CsvLayout.from_header(["x", "labels"], "t.csv", label_ids=True, num_labels=3)
    assert csv_format.parse_row(["1", "2|0"], ids, "t.csv", 2).labels == (2, 0)


@pytest.mark.parametrize(
    ("row", "reason", "vocab", "ids"),
    [
        (["1", "2"], "wrong_field_count", None, False),
        (["a", "b", "cat"], "non_numeric", None, False),
        (["nan", "1", "cat"], "non_finite", None, False),
        (["1", "-inf", "cat"], "non_finite", None, False),
        (["1", "2", "cat|cat"], "duplicate_label", None, False),
        (["1", "2", "bird"], "unknown_label", {"cat": 0}, False),
        (["1", "2", "3"], "label_id_out_of_range", None, True),
        (["1", "2", "x"], "non_numeric", None, True),
    ],
)
def test_csv_bad_rows(row, reason, vocab, ids):
    layout = csv_format.CsvLayout.from_header(["x", "y", "labels"], "t.csv", label_ids=ids, num_labels=3)
    _bad(lambda: csv_format.parse_row(row, layout, "t.csv", 7, vocab), reason, "t.csv", 7)


PACKAGES = """Package: foo
Depends: libc6 (>= 2.34), bar:any | baz, libc6
Pre-Depends: dpkg (>= 1.15)
Recommends: qux [amd64]
Description: a foo tool
Description-md5: abc
Tag: role::program, interface::commandline,
 use::editing

Package: lib
Description: a library
 with its long text inline
 .
 second paragraph
"""


def test_debian_stanzas_labels_and_text():
    records = list(debian.stanzas(enumerate(PACKAGES.splitlines(), 1), "Packages"))
    (line1, foo), (line2, lib) = records
    assert (line1, line2) == (1, 10)
    assert debian.debtags_labels(foo, "P", 1) == ("role::program", "interface::commandline", "use::editing")
    assert debian.deps_labels(foo, "P", 1) == ("libc6", "bar", "dpkg", "qux")
    assert debian.deps_labels(lib, "P", 10) == () and debian.debtags_labels(lib, "P", 10) == ()
    assert debian.join_key(foo, "P", 1) == ("foo", "abc")
    short, long = debian.description_parts(lib["Description"])
    assert short == "a library" and long == "with its long text inline\n\nsecond paragraph"
    assert debian.example_text("lib", short, long).startswith("lib\na library\nwith")


def test_debian_bad_records():
    text = "Package: a\nnot a field line\n continuation\n\n continuation first\nPackage: b\n"
    items = list(debian.stanzas(enumerate(text.splitlines(), 1), "Packages"))
    errors = [i for i in items if isinstance(i, RecordError)]
    assert [(e.where, e.reason) for e in errors] == [(2, "bad_field"), (5, "bad_field")]
    assert all("Packages:" in str(e) for e in errors)
    _bad(
        lambda: debian.debtags_labels({"Tag": "a::b, a::b"}, "Packages", 3), "duplicate_label", "Packages", 3
    )
    _bad(lambda: debian.deps_labels({"Depends": "(>= 1)"}, "Packages", 3), "bad_dependency", "Packages", 3)
    _bad(lambda: debian.require({}, "Package", "Packages", 3), "missing_field", "Packages", 3)


@pytest.mark.parametrize("suffix", ["", ".gz", ".xz", ".lz4"])
def test_numbered_lines_reads_every_compression(tmp_path: Path, suffix: str):
    data = b"one\ntwo\r\nthree"
    opener = {"": open, ".gz": gzip.open, ".xz": lzma.open, ".lz4": lz4.frame.open}[suffix]
    path = tmp_path / f"f.txt{suffix}"
    with opener(path, "wb") as handle:
        handle.write(data)
    assert list(numbered_lines(str(path), start=2)) == [(2, "two"), (3, "three")]


@pytest.mark.parametrize("suffix", [".gz", ".xz", ".lz4"])
def test_truncated_compressed_file_names_the_file(tmp_path: Path, suffix: str):
    opener = {".gz": gzip.open, ".xz": lzma.open, ".lz4": lz4.frame.open}[suffix]
    path = tmp_path / f"f.txt{suffix}"
    with opener(path, "wb") as handle:
        handle.write(b"".join(b"line %d with some text\n" % i for i in range(20000)))
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(SourceError, match=r"f\.txt.*truncated or corrupt"):
        list(numbered_lines(str(path)))


def test_splits_are_stable():
    assert unit_hash("0ad") == unit_hash("0ad") and 0 <= unit_hash("x") < 1
    assert catalogue_split("0ad") == catalogue_split("0ad")
    shares = [catalogue_split(f"pkg{i}") for i in range(5000)]
    assert abs(shares.count("train") / 5000 - 0.8) < 0.03
    assert carve_validation("test", "k", 1.0) == "test" and carve_validation("train", "k", 0.0) == "train"
    assert [split_hint(n) for n in ("yeast-train.arff", "test.txt", "x_valid.csv", "data.csv")] == [
        "train",
        "test",
        "validation",
        None,
    ]


def test_tf_example_round_trip_and_message_search():
    record = Record("id1", "train", (3, 1), feature_ids=(0, 5), feature_values=(1.0, 0.5))
    assert labels_of_tf_example(to_tf_example(record)) == [3, 1]
    err = RecordError("/d/train.txt", 12, "non_numeric", "feature 3: 'x' is not a number")
    wrapped = f"RuntimeError: Traceback ... {err} [while running 'ReadParse']"
    assert find_record_message(wrapped) == str(err)


def test_a_record_serializes_to_the_same_bytes_in_every_process():
    """Protobuf writes a map in an order that varies between processes unless asked for a deterministic one; the
    features map is written in key order, so two builds of the same data hold the same bytes."""
    import subprocess
    import sys

    script = ("import hashlib; from cdgt.components.formats.record import Record, to_tf_example; "
              "record = Record(id='p', split='train', labels=(1, 5), text='a b'); "
              "print(hashlib.sha256(to_tf_example(record)).hexdigest())")
    digests = {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
               for _ in range(4)}
    assert len(digests) == 1, digests
