"""ShardCheck: stop the pipeline when a split's shards are not the ones `cdgt data build` wrote.

Why a component: ImportExampleGen reads whatever `<data_root>/<split>/*.tfrecord.gz` holds, so a train shard
replaced by another split's file (20 rows where manifest.json says 180) would train without a word. `cdgt train`
checks the shards when it reads a split (cdgt_keras/records.py); ShardCheck runs the same checks when the pipeline
runs (on Kubeflow the data is rebuilt and uploaded at run time, so nothing can be checked at compile time): per
split, the shard list, the record count and, for a local data root, each shard's sha256 against manifest.json.
It takes ImportExampleGen's output as its input, so it runs again whenever ExampleGen read changed files, and
pipeline/pipeline.py makes Transform and LabelStatsGen wait for it: nothing trains on data that fails it.
`cdgt run` prints the reason in one line (pipeline/cli/run.py).

Example (inside a pipeline):
    >>> check = ShardCheck(examples=gen.outputs["examples"], data_root="data/yeast")   # doctest: +SKIP
    >>> transform.add_upstream_node(check)                                            # doctest: +SKIP
"""

# No `from __future__ import annotations`: TFX reads the component signatures at run time.

from pathlib import Path

from tfx import v1 as tfx

from cdgt_keras import records
from cdgt_keras.features import LABELS, label_spec


class ShardMismatch(ValueError):
    """A split's shards differ from what manifest.json records; the message names the file and what was expected."""


def split_files(data_root: str, split: str) -> list[str]:
    """The split's shards, local or remote (gs://, s3://: through TensorFlow's file systems)."""
    import tensorflow as tf

    files = sorted(tf.io.gfile.glob(f"{data_root.rstrip('/')}/{split}/*.tfrecord.gz"))
    if not files:
        raise ShardMismatch(f"{data_root}/{split}: no *.tfrecord.gz shards; rebuild the data with `cdgt data build`")
    return files


def count_records(files: list[str]) -> int:
    """How many tf.Examples the shards hold (a truncated shard is an error naming it)."""
    return sum(int(batch[LABELS].dense_shape[0]) for batch in records._batches(files, label_spec(), 4096))


def check_shards(data_root: str) -> dict[str, int]:
    """Check every split of a built data directory against its manifest.json (cdgt_keras/records.py's checks):
    the shard list, then the record count, then (local data roots; a remote one would be downloaded a second time)
    each shard's sha256. Returns {split: records}; raises ShardMismatch naming the file and what was expected."""
    manifest = records.read_manifest(data_root)
    directory = Path(data_root)
    listing_only = {**manifest, "data_sha256": {}}
    counts = {}
    for split in records.SPLITS:
        files = split_files(data_root, split)
        try:
            records._check_files(directory, split, files, listing_only)
            counts[split] = count_records(files)
            records._check_count(directory, split, files, manifest, counts[split])
            if "://" not in data_root:
                records._check_files(directory, split, files, manifest)
        except ValueError as err:
            raise ShardMismatch(str(err)) from None
    return counts


@tfx.dsl.components.component
def ShardCheck(examples: tfx.dsl.components.InputArtifact[tfx.types.standard_artifacts.Examples],
               data_root: tfx.dsl.components.Parameter[str]) -> None:
    """Raise ShardMismatch when the shards under `data_root` are not the ones its manifest.json records.
    `examples` (ImportExampleGen's output, not read) ties the check's cache to the files ExampleGen read."""
    del examples
    check_shards(data_root)
