"""Issue 16, build side: duplicate names, empty splits, option ranges, labels without a training positive,
atomic manifests, a full disk, and one-line errors for awkward input (tabs, a byte-order mark, non-UTF-8)."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import lz4.frame
import pytest
from ingest_helpers import read_json, run_build, write_xmc

from cdgt.components import example_gen
from cdgt.components.formats import arff, csv_format, xmc
from cdgt.components.formats.errors import RecordError, SourceError, find_error_message
from cdgt.components.formats.sources import make_source
from cdgt.components.label_stats import write_json
from cdgt.pipeline.cli import main

XML = '<labels><label name="lab_a"/><label name="lab_b"/></labels>'
HEAD = ("@relation r\n@attribute f1 numeric\n@attribute {f2} numeric\n@attribute lab_a {{0,1}}\n"
        "@attribute {lab} {{0,1}}\n")


def _arff_folder(tmp_path: Path, f2: str = "f2", lab: str = "lab_b", test_rows: int = 2) -> Path:
    folder = tmp_path / "set"
    folder.mkdir()
    head = HEAD.format(f2=f2, lab=lab) + "@data\n"
    (folder / "set-train.arff").write_text(head + "".join(f"{i},1,{i % 2},1\n" for i in range(30)))
    (folder / "set-test.arff").write_text(head + "".join(f"{i},2,0,1\n" for i in range(test_rows)))
    (folder / "set.xml").write_text(XML)
    return folder


def _build(tmp_path: Path, *args: str) -> list[str]:
    return ["data", "build", *args, "--out", str(tmp_path / "out")]


def test_duplicate_label_names_are_rejected_naming_the_label(tmp_path: Path, capsys):
    lines = enumerate((HEAD.format(f2="f2", lab="lab_a") + "@data").splitlines(), 1)
    with pytest.raises(SourceError, match=r"t\.arff: label 'lab_a' is declared twice \(attributes 2 and 3"):
        arff.parse_header(lines, ["lab_a", "lab_a"], "t.arff")
    with pytest.raises(SourceError, match=r"x\.xml: label 'lab_b' is named twice"):
        arff.parse_label_xml('<labels><label name="lab_b"/><label name="lab_b"/></labels>', "x.xml")
    folder = _arff_folder(tmp_path, lab="lab_a")
    (folder / "set.xml").write_text('<labels><label name="lab_a"/><label name="lab_a"/></labels>')
    assert main(_build(tmp_path, str(folder), "--format", "arff")) == 1
    assert "label 'lab_a' is named twice" in capsys.readouterr().err


def test_duplicate_features_columns_and_vocabulary_names_are_rejected(tmp_path: Path):
    lines = enumerate((HEAD.format(f2="f1", lab="lab_b") + "@data").splitlines(), 1)
    with pytest.raises(SourceError, match=r"attribute 'f1' is declared twice \(attributes 0 and 1"):
        arff.parse_header(lines, ["lab_a", "lab_b"], "t.arff")
    with pytest.raises(SourceError, match=r"t\.csv: column 'x' appears twice in the header \(columns 1 and 3\)"):
        csv_format.CsvLayout.from_header(["x", "y", "x", "labels"], "t.csv")
    (tmp_path / "train.csv").write_text("x,labels\n1,a\n")
    (tmp_path / "test.csv").write_text("x,labels\n1,a\n")
    (tmp_path / "vocab.lst").write_text("a\nb\n\na\n")
    with pytest.raises(SourceError, match=r"vocab\.lst:4: label 'a' is listed twice \(lines 1 and 4\)"):
        make_source("csv", [str(tmp_path / "train.csv"), str(tmp_path / "test.csv")],
                    label_vocab=str(tmp_path / "vocab.lst"))


def test_duplicate_debian_package_stanzas_are_counted(tmp_path: Path):
    folder = tmp_path / "apt"
    folder.mkdir()
    stanzas = [f"Package: p{i}\nDescription: short {i}\nTag: t::{i % 2}\n" for i in range(40)]
    stanzas.append("Package: p3\nDescription: short 3 again\nTag: t::1\n")
    with lz4.frame.open(folder / "Packages.lz4", "wt") as handle:
        handle.write("\n".join(stanzas))
    (folder / "Translation-en").write_text("")
    manifest = run_build("debian", [folder], tmp_path / "out", source_options={"task": "debtags"}, task="debtags")
    assert manifest["notes"]["duplicate_package_stanza"] == 1 and manifest["num_examples"] == 41


@pytest.mark.parametrize("fraction", ["-0.5", "1.5", "0", "1"])
def test_validation_fraction_outside_the_open_interval_is_refused_at_the_start(tmp_path: Path, capsys, fraction):
    folder = _arff_folder(tmp_path)
    assert main(_build(tmp_path, str(folder), "--format", "arff", f"--validation-fraction={fraction}")) == 1
    assert f"--validation-fraction must be in (0, 1), got {float(fraction)}" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_missing_test_file_or_an_empty_split_is_refused(tmp_path: Path, capsys):
    folder = _arff_folder(tmp_path, test_rows=0)  # a header-only test file
    assert main(_build(tmp_path, str(folder), "--format", "arff")) == 1
    err = capsys.readouterr().err
    assert "error: no examples in the test split (splits by file (set-test.arff=test" in err
    assert "header-only" in err and not (tmp_path / "out" / "manifest.json").exists()
    (folder / "set-test.arff").unlink()
    assert main(_build(tmp_path, str(folder), "--format", "arff")) == 1
    assert "no test file among" in capsys.readouterr().err


def test_labels_without_a_training_positive_are_counted_in_the_manifest_and_the_summary(tmp_path: Path, capsys):
    write_xmc(tmp_path / "train.txt", "20 3 4", [f"{i % 2} 0:1" for i in range(20)])
    write_xmc(tmp_path / "test.txt", "1 3 4", ["3 0:1"])
    assert main(_build(tmp_path, str(tmp_path), "--format", "xmc")) == 0
    manifest = read_json(tmp_path / "out" / "manifest.json")
    assert manifest["labels_without_training_positive"] == 2
    assert manifest["labels_without_training_positive_names"] == ["2", "3"]
    assert "4 labels (2 without a training positive, e.g. 2, 3)" in capsys.readouterr().out


def test_json_is_written_atomically(tmp_path: Path, monkeypatch):
    target = tmp_path / "manifest.json"
    write_json(str(target), {"old": 1})

    def full_disk(*_args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("os.fsync", full_disk)
    with pytest.raises(OSError, match="No space left"):
        write_json(str(target), {"new": 2})
    assert json.loads(target.read_text()) == {"old": 1} and [p.name for p in tmp_path.iterdir()] == ["manifest.json"]


def test_a_full_disk_during_a_build_is_one_line(tmp_path: Path, capsys, monkeypatch):
    write_xmc(tmp_path / "train.txt", "20 3 4", [f"{i % 2} 0:1" for i in range(20)])
    write_xmc(tmp_path / "test.txt", "1 3 4", ["3 0:1"])

    def full_disk(path, _obj):
        raise OSError(errno.ENOSPC, "No space left on device", path)

    monkeypatch.setattr(example_gen, "write_json", full_disk)
    assert main(_build(tmp_path, str(tmp_path), "--format", "xmc")) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("cdgt data build: error: [Errno 28] No space left on device: ")
    assert err[-1].endswith("label_stats.json'") and "Traceback" not in "\n".join(err)


def test_existing_output_folder_is_one_line(tmp_path: Path, capsys):
    write_xmc(tmp_path / "train.txt", "20 3 4", [f"{i % 2} 0:1" for i in range(20)])
    write_xmc(tmp_path / "test.txt", "1 3 4", ["3 0:1"])
    assert main(_build(tmp_path, str(tmp_path / "train.txt"), str(tmp_path / "test.txt"), "--format", "xmc")) == 0
    capsys.readouterr()
    assert main(_build(tmp_path, str(tmp_path / "train.txt"), str(tmp_path / "test.txt"), "--format", "xmc")) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("cdgt data build: error: ") and err[-1].endswith("pass --overwrite to replace it")
    (tmp_path / "file").write_text("x")
    assert main(["data", "build", str(tmp_path), "--format", "xmc", "--out", str(tmp_path / "file" / "o")]) == 1
    assert "file is a regular file, not a folder" in capsys.readouterr().err


def test_tabs_in_xmc_lines_are_named():
    header = xmc.parse_header("3 10 4", "train.txt")
    with pytest.raises(RecordError, match=r"train\.txt:2: .*tabs are not separators") as info:
        xmc.parse_line("0,1\t1:0.5\t2:1", header, "train.txt", 2)
    assert info.value.reason == "tab_separator"


def test_a_byte_order_mark_in_a_csv_header_is_accepted(tmp_path: Path):
    (tmp_path / "train.csv").write_bytes("\ufefflabels,x\na,1\nb,2\na|b,3\n".encode())  # as Excel writes it
    (tmp_path / "test.csv").write_bytes("\ufefflabels,x\na,1\n".encode())
    (tmp_path / "valid.csv").write_text("labels,x\nb,1\n")
    manifest = run_build("csv", [tmp_path], tmp_path / "out")
    assert manifest["splits"]["train"]["examples"] == 3 and manifest["label_names"] == ["a", "b"]


def test_non_utf8_input_names_the_file_and_line(tmp_path: Path, capsys):
    good = [f"{i % 4} {i % 3}:1" for i in range(3000)]  # more than one decoding chunk before the bad byte
    (tmp_path / "train.txt").write_bytes(("3001 3 4\n" + "\n".join(good) + "\n").encode() + b"1 1:1 \xff\n")
    write_xmc(tmp_path / "test.txt", "1 3 4", ["0 0:1"])
    assert main(_build(tmp_path, str(tmp_path), "--format", "xmc")) == 1
    err = capsys.readouterr().err
    assert "train.txt:3002: not UTF-8 text (byte b'\\xff' cannot be decoded)" in err and "Traceback" not in err
    assert main(_build(tmp_path, str(tmp_path), "--format", "xmc", "--on-error", "skip", "--overwrite")) == 0
    assert "'unreadable_file': 1" in capsys.readouterr().out  # skip mode: counted, the lines before it kept


def test_a_worker_error_as_text_gives_its_one_line():
    wrapped = "Traceback ...\ncomponents.formats.errors.BuildFailed: a.txt:3: bad (the first of 3) [while running 'F']"
    assert find_error_message(wrapped) == "a.txt:3: bad (the first of 3)"
    full = "Traceback ...\nOSError: [Errno 28] No space left on device: '/o/train/x' [while running 'Write_train']"
    assert find_error_message(full) == "[Errno 28] No space left on device: '/o/train/x'"
    assert find_error_message("KeyError: 'x'") is None
