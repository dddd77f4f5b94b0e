"""The ingestion job: any source -> gzipped TFRecords of tf.Examples per split, `manifest.json`,
`label_stats.json`, and (with on_error="skip") `rejects.jsonl`. One Beam pipeline, streaming: files are read
record by record; the only whole-data state is per-label tallies (O(L)) and, for the catalogue, the join.

Layout of `out`: `<split>/data-SSSSS-of-NNNNN.tfrecord.gz` (split = train, validation, test).

Example:
    >>> from cdgt.components.formats.sources import make_source  # doctest: +SKIP
    >>> build(make_source("arff", ["../shared/data/yeast"]), BuildOptions(out="/tmp/yeast"))  # doctest: +SKIP
"""

from __future__ import annotations

import glob
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.options.pipeline_options import PipelineOptions

from cdgt.components import build_progress, manifest, rare_variants
from cdgt.components.build_combiners import FirstRejectFn, SplitCountsFn, TallyFn
from cdgt.components.formats.errors import BuildFailed
from cdgt.components.formats.record import Record, to_tf_example
from cdgt.components.formats.vocabulary import Vocabulary, build_vocabulary
from cdgt.components.label_stats import STATS_FILE, LabelCountsFn, finished_stats, read_json, write_json
from cdgt_keras.config import CDGTConfig
from cdgt_keras.records import RECORD_ORDER, SPLITS, in_id_order

ON_ERROR = ("fail", "skip")
BUILD_ERROR_FILE = "build_error.json"  # why a build failed, for the driver to raise; never left by a finished build


@dataclass
class BuildOptions:
    """What to build and how; everything here is recorded in the manifest."""

    out: str
    task: str | None = None
    on_error: str = "fail"
    min_label_count: int = 0
    rare_fraction: float = 0.0
    rare_k: int = 0
    seed: int = 0
    head_fraction: float = CDGTConfig.head_fraction
    tail_fraction: float = CDGTConfig.tail_fraction
    overwrite: bool = False

    def __post_init__(self) -> None:
        if self.on_error not in ON_ERROR:
            raise ValueError(f"on_error must be one of {ON_ERROR}, got {self.on_error!r}")
        if not 0.0 <= self.rare_fraction <= 1.0:
            raise ValueError(f"rare fraction must be in [0, 1], got {self.rare_fraction}")
        if self.rare_fraction > 0 and self.rare_k < 1:
            raise ValueError("a rare variant needs rare_k >= 1 (the number of rarest labels to thin)")

    @property
    def rare(self) -> bool:
        return self.rare_fraction > 0 and self.rare_k > 0


def build(source: Any, options: BuildOptions, pipeline_args: Sequence[str] = ()) -> dict[str, Any]:
    """Run the job; return the manifest. Bad records in fail mode and empty splits raise BuildFailed here, in the
    driver (the job records them in BUILD_ERROR_FILE instead of failing a worker: no runner traceback); a file that
    cannot be read raises from the job (a runner may wrap it)."""
    prepare_output(options.out, options.overwrite)
    static = manifest.static_facts(
        source, options.task, {k: v for k, v in asdict(options).items() if k != "out"}
    )
    build_progress.reset()
    pipeline = beam.Pipeline(options=PipelineOptions(list(pipeline_args)))
    _graph(pipeline, source, options, static)
    result = pipeline.run()
    result.wait_until_finish()
    _show_stages(result)
    failed = os.path.join(options.out, BUILD_ERROR_FILE)
    if _exists(failed):
        raise BuildFailed(read_json(failed)["error"])
    return read_json(os.path.join(options.out, manifest.MANIFEST_FILE))


def _show_stages(result: Any) -> None:
    """One progress line with the finished job's counts per stage (records read, rejected, written per split)."""
    line = build_progress.job_line(build_progress.job_counts(result))
    if line:
        build_progress.show(f"[cdgt data] {line}")


def _exists(path: str) -> bool:
    if "://" in path:
        from apache_beam.io.filesystems import FileSystems

        return FileSystems.exists(path)
    return os.path.exists(path)


def prepare_output(out: str, overwrite: bool) -> None:
    """Refuse to mix with an earlier build unless `overwrite`, which deletes that build's files only. The files
    of an unfinished build (no manifest.json: it failed or was killed) are replaced without asking."""
    if "://" in out:
        return
    if os.path.exists(out) and not os.path.isdir(out):
        raise FileExistsError(f"--out {out} is a file, not a folder")
    finished = os.path.exists(os.path.join(out, manifest.MANIFEST_FILE))
    old = [os.path.join(out, n) for n in (manifest.MANIFEST_FILE, STATS_FILE, "rejects.jsonl", BUILD_ERROR_FILE)]
    old = [p for p in old if os.path.exists(p)]
    old += [p for s in SPLITS for p in glob.glob(os.path.join(out, s, "data-*.tfrecord.gz"))]
    if finished and not overwrite:
        raise FileExistsError(f"{out} already holds a built data set ({old[0]}); pass --overwrite to replace it")
    if old and not finished:
        print(f"[cdgt data] {out}: replacing the files of an unfinished build", file=sys.stderr)
    for path in old:
        os.remove(path)
    os.makedirs(out, exist_ok=True)


def _graph(pipeline: Any, source: Any, options: BuildOptions, static: dict[str, Any]) -> None:
    records, rejects, notes = source.expand(pipeline, "Read")
    first_reject = pipeline | "NoFirstReject" >> beam.Create([None])
    if options.on_error == "fail":  # every record is read, so the error can say how many are bad
        first_reject = rejects | "FirstReject" >> beam.CombineGlobally(FirstRejectFn())
    else:
        _ = (
            rejects
            | "RejectJson" >> beam.Map(lambda e: json.dumps(e.to_reject()))
            | "WriteRejects"
            >> beam.io.WriteToText(
                os.path.join(options.out, "rejects"), ".jsonl", num_shards=1, shard_name_template=""
            )
        )
    vocab, side = _vocabulary(pipeline, source, options)
    view = beam.pvalue.AsSingleton(vocab)
    records = records | "Remap" >> beam.Map(_remap, view)
    plan = pipeline | "NoRarePlan" >> beam.Create([{}])
    if options.rare:
        train = side | "SideRemap" >> beam.Map(_remap, view) | "SideTrain" >> beam.Filter(_is_train)
        rare = beam.pvalue.AsSingleton(vocab | "RareLabels" >> beam.Map(lambda v: v.rare))
        plan = rare_variants.removal_plan(train, rare, options.seed, options.rare_fraction)
        records = records | "RemoveRare" >> beam.Map(
            rare_variants.without_removed, beam.pvalue.AsSingleton(plan)
        )
    written = _write_splits(records, options.out)
    finish = {
        "counts": records | "SplitCounts" >> beam.CombineGlobally(SplitCountsFn()),
        "rejects": _by_reason(rejects | "RejectReason" >> beam.Map(lambda e: e.reason), "Rejects"),
        "notes": _by_reason(notes, "Notes"),
        "stats": (
            records
            | "Train" >> beam.Filter(_is_train)
            | "TrainLabels" >> beam.Map(lambda r: r.labels)
            | "LabelCounts" >> beam.CombineGlobally(LabelCountsFn())
        ),
        "vocab": vocab,
        "plan": plan,
        "first_reject": first_reject,
    }
    views = {k: beam.pvalue.AsSingleton(v) for k, v in finish.items()}
    _ = (
        pipeline
        | "FinishSeed" >> beam.Create([None])
        | "Finish" >> beam.Map(_finish, static, options, beam.pvalue.AsList(written), **views)
    )


def _is_train(record: Record) -> bool:
    return record.split == "train"


def _remap(record: Record, vocab: Vocabulary) -> Record:
    return record.with_labels(vocab.remap_labels(record.labels))


def _vocabulary(pipeline: Any, source: Any, options: BuildOptions) -> tuple[Any, Any]:
    """A singleton Vocabulary; computed from a second, labels-only read when the labels depend on the data."""
    fixed = source.label_names
    if fixed is not None and not options.min_label_count and not options.rare:
        return pipeline | "FixedVocabulary" >> beam.Create([Vocabulary(list(fixed))]), None
    side, _, _ = source.expand(pipeline, "Vocab", labels_only=True)
    vocab = (
        side
        | "TallyPairs" >> beam.Map(lambda r: (r.split == "train", r.labels))
        | "Tally" >> beam.CombineGlobally(TallyFn())
        | "Vocabulary" >> beam.Map(_make_vocabulary, fixed, source.label_ids_open, options)
    )
    return vocab, side


def _make_vocabulary(counts: dict, fixed: Any, open_ids: bool, options: BuildOptions) -> Vocabulary:
    vocab = build_vocabulary(counts, fixed, open_ids, options.min_label_count)
    if options.rare:
        vocab.rare = rare_variants.rare_labels(vocab.train_counts or [], options.rare_k).tolist()
    return vocab


def _write_splits(records: Any, out: str) -> Any:
    """One gzipped TFRecord set per split, its records in the order of their ids (cdgt_keras.records.in_id_order;
    each split is gathered on one worker to be sorted, which holds it in memory once more); returns the
    PCollection of written file names."""
    parts = records | "BySplit" >> beam.Partition(lambda r, _: SPLITS.index(r.split), len(SPLITS))
    written = []
    for split, part in zip(SPLITS, parts):
        written.append(
            part
            | f"Encode_{split}" >> beam.Map(lambda r, s: (r.id, _encode(r, s)), split)
            | f"Gather_{split}" >> beam.combiners.ToList()
            | f"Order_{split}" >> beam.FlatMap(in_id_order)
            | f"Write_{split}"
            >> beam.io.WriteToTFRecord(
                os.path.join(out, split, "data"),
                file_name_suffix=".tfrecord.gz",
                compression_type=CompressionTypes.GZIP,
            )
        )
    return written | "WrittenFiles" >> beam.Flatten()


def _encode(record: Record, split: str) -> bytes:
    """The record's serialized tf.Example, counted as written to `split`."""
    build_progress.count("Write", split)
    return to_tf_example(record)


def _by_reason(reasons: Any, label: str) -> Any:
    return (
        reasons
        | f"{label}Count" >> beam.combiners.Count.PerElement()
        | f"{label}Dict" >> beam.combiners.ToDict()
    )


def _finish(
    _: None,
    static: dict,
    options: BuildOptions,
    written: list[str],
    counts: dict,
    rejects: dict,
    notes: dict,
    stats: tuple,
    vocab: Vocabulary,
    plan: dict,
    first_reject: Any,
) -> None:
    """Refuse a failed build (bad records in fail mode, an empty split); else write label_stats.json and, last,
    manifest.json (after every data file exists), each atomically."""
    try:
        _check_build(first_reject, rejects, counts, static)
    except BuildFailed as failed:
        write_json(os.path.join(options.out, BUILD_ERROR_FILE), {"error": str(failed)})
        return
    label_stats = finished_stats(
        stats, len(vocab.names), vocab.names, head_fraction=options.head_fraction, tail_fraction=options.tail_fraction
    )
    write_json(os.path.join(options.out, STATS_FILE), label_stats)
    extra: dict[str, Any] = {
        "labels_dropped_below_min_count": vocab.dropped,
        "label_rule": manifest.label_rule(options.min_label_count, len(vocab.names), vocab.dropped),
    }
    extra.update(manifest.unseen_labels(label_stats["counts"], vocab.names))
    if options.rare:
        extra["rare_variant"] = {
            "fraction": options.rare_fraction,
            "k": options.rare_k,
            "seed": options.seed,
            "labels": vocab.rare,
            "positives_removed": sum(len(v) for v in plan.values()),
            "selection": rare_variants.__doc__.split("\n\n")[1].replace("\n", " "),
        }
    extra["record_order"] = RECORD_ORDER
    extra["data_files"] = sorted(os.path.relpath(p, options.out) for p in written)
    extra["data_sha256"] = {os.path.relpath(p, options.out): manifest.sha256_file(p) for p in sorted(written)}
    result = manifest.assemble(static, counts, rejects, notes, vocab.names, extra)
    write_json(os.path.join(options.out, manifest.MANIFEST_FILE), result)


def _check_build(first_reject: Any, rejects: dict, counts: dict, static: dict) -> None:
    """BuildFailed for bad records in fail mode (the first by file and line, and how many) or an empty split."""
    if first_reject is not None:
        total = sum(rejects.values())
        raise BuildFailed(
            f"{first_reject} (the first of {total:,} bad records: {dict(sorted(rejects.items()))}; "
            "--on-error skip writes them to rejects.jsonl and builds the rest)"
        )
    empty = [split for split in SPLITS if not counts.get(split, {}).get("examples")]
    if empty:
        raise BuildFailed(manifest.empty_split_message(empty, static))
