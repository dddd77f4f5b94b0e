"""pipeline.callbacks: what the Trainer writes for TensorBoard, read back from the event files.

A small CDGTModel trains two epochs with the Trainer's callbacks; the test reads the event files and asks
TensorBoard's own HParams backend for the session groups, as its dashboard does.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from cdgt.pipeline.callbacks import (
    REPORT_METRICS,
    CdgtTensorBoard,
    ValidationReport,
    empty_reason,
    log_hparams,
    player_f1_chart,
)
from cdgt_keras import CDGTConfig, label_frequencies, synthetic_splits
from cdgt_keras.labels import head_tail_split
from cdgt_keras.learning import build_trainable
from cdgt_keras.metrics import propensities


def _tags(run_dir: Path) -> dict[str, set[str]]:
    """{tag: {kind}} of the event files directly in run_dir (kind: scalar | image | plugin name)."""
    out: dict[str, set[str]] = {}
    for path in run_dir.glob("events.out.tfevents*"):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                out.setdefault(value.tag, set()).add(value.metadata.plugin_data.plugin_name or "none")
    return out


def _setup(config: CDGTConfig, rows: int, seed: int) -> tuple:
    """Synthetic splits, the Trainer's label statistics of their training split, and an untrained model."""
    splits = synthetic_splits(rows, seed=seed)
    train, val = splits["train"], splits["validation"]
    counts, freq = label_frequencies(train.labels, train.num_labels)
    head, tail = head_tail_split(freq, config.head_fraction, config.tail_fraction)
    stats = {"head": head, "tail": tail, "counts": counts, "propensities": propensities(counts, train.num_examples)}
    return train, val, counts, stats, build_trainable(config, freq)


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory) -> Path:
    config = CDGTConfig(n_players=3, epochs=2, encoder_hidden=(16,), head_hidden=8, batch_size=64, seed=0)
    train, val, _, stats, model = _setup(config, 600, 0)
    val_x = tf.data.Dataset.from_tensor_slices(val.features.astype(np.float32)).batch(64)
    run = tmp_path_factory.mktemp("model_run") / "7"
    report = ValidationReport(val_x, val.labels, stats, config)
    log_hparams(str(run), config, trial_id="trial-7")
    model.fit(train.features.astype(np.float32), train.labels.toarray().astype(np.float32), epochs=2,
              batch_size=64, validation_data=(val.features.astype(np.float32), val.labels.toarray()),
              callbacks=[report, CdgtTensorBoard(str(run), report)], verbose=0)
    return run


def test_each_validation_figure_is_written_once_in_the_validation_run(log_dir):
    assert sorted(p.name for p in log_dir.iterdir() if p.is_dir()) == ["train", "validation"]
    validation = _tags(log_dir / "validation")
    assert not [t for t in validation if t.startswith("evaluation_")], sorted(validation)  # Keras' duplicates
    for name in REPORT_METRICS:  # Rare-F1, F1, P@k, PSP@k and nDCG@k
        assert f"epoch_{name}" in validation, (name, sorted(validation))
    assert {"epoch_ndcg_at_1", "epoch_ndcg_at_5", "epoch_kl_tail", "epoch_payoff"} <= set(validation)
    assert validation["player_f1_head_tail"] == {"images"} and validation["label_frequency_curve"] == {"images"}
    train = _tags(log_dir / "train")
    assert not set(train) & {"player_f1_head_tail", "label_frequency_curve", "epoch_rare_f1"}


def test_the_hparams_dashboard_links_each_runs_validation_metrics(log_dir):
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
    from tensorboard.context import RequestContext
    from tensorboard.plugins import base_plugin
    from tensorboard.plugins.hparams import api_pb2, backend_context, list_session_groups

    root = str(log_dir.parent)  # `tensorboard --logdir .../model_run`: one run directory per Trainer execution
    multiplexer = plugin_event_multiplexer.EventMultiplexer()
    multiplexer.AddRunsFromDirectory(root)
    multiplexer.Reload()
    context = base_plugin.TBContext(logdir=root, multiplexer=multiplexer,
                                    data_provider=data_provider.MultiplexerDataProvider(multiplexer, root))
    statuses = [api_pb2.STATUS_UNKNOWN, api_pb2.STATUS_SUCCESS, api_pb2.STATUS_FAILURE, api_pb2.STATUS_RUNNING]
    request = api_pb2.ListSessionGroupsRequest(start_index=0, slice_size=10, allowed_statuses=statuses)  # as the UI
    response = list_session_groups.Handler(RequestContext(), backend_context.Context(context), "", request).run()
    [group] = response.session_groups
    [session] = group.sessions
    assert session.name == "7" and group.hparams["n_players"].number_value == 3
    values = {(m.name.group, m.name.tag): m.value for m in group.metric_values}
    for name in ("rare_f1", "micro_f1", "p_at_1", "ndcg_at_3", "payoff"):
        assert ("validation", f"epoch_{name}") in values, sorted(values)
    assert np.isfinite(values[("validation", "epoch_p_at_1")]) and values[("train", "epoch_loss")] > 0


def test_an_empty_player_panel_says_why():
    f1 = np.array([[0.6, np.nan], [np.nan, np.nan], [np.nan, np.nan]])
    n_labels = np.array([[20, 0], [0, 0], [0, 20]])
    positives = np.array([[50, 0], [0, 0], [0, 0]])
    fig = player_f1_chart(f1, n_labels, positives)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts.count("no tail labels") == 2 and texts.count("no head labels") == 2
    assert "20 tail labels, no positive in validation" in texts
    assert empty_reason(20, 50, "head") is None


def test_the_trainers_report_keeps_the_same_per_example_rows_for_early_stopping_as_cdgt_train():
    """Under early_stopping_min_z the TFX Trainer's report and `cdgt train`'s ranking monitor hand early stopping
    the same per-example rows of the same model: both roads test an epoch against the first alike."""
    from cdgt_keras.learning import RankingMonitor

    config = CDGTConfig(n_players=2, encoder_hidden=(16,), head_hidden=(), batch_size=64, seed=0,
                        early_stopping_metric="psp_at_5", early_stopping_min_z=2.0)
    train, val, counts, stats, model = _setup(config, 400, 1)
    model.build((None, train.num_features))
    report = ValidationReport(tf.data.Dataset.from_tensor_slices(val.features.astype(np.float32)).batch(64),
                              val.labels, stats, config)
    monitor = RankingMonitor(val, counts, train.num_examples, config)
    for callback in (report, monitor):
        callback.set_model(model)
        callback.on_epoch_end(0, {})
    assert report.rows is not None and report.rows.shape == (val.num_examples,) and report.rows.any()
    np.testing.assert_allclose(report.rows, monitor.rows, rtol=0, atol=1e-9)
