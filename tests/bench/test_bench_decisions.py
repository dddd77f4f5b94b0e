"""A bench run whose tail decides apart (tail_decisions="own") reports what `cdgt train`'s evaluation gives for
the same model: the ranking metrics from its ranking's scores, the F1 metrics from its decisions' own, both
predicted in one pass."""

from __future__ import annotations

import numpy as np
import pytest


def test_a_run_whose_tail_decides_apart_reports_the_evaluation_of_its_two_answers(monkeypatch):
    import cdgt_keras.training as training
    from cdgt.bench.datasets import load_dataset
    from cdgt.bench.methods import resolve
    from cdgt.bench.runner import RunSpec, _run_cdgt
    from cdgt_keras.evaluation import evaluate_model, evaluate_probs, predict_answers
    from cdgt_keras.labels import label_frequencies

    held, fit = [], training.fit_model

    def keep(*args, **kwargs):
        out = fit(*args, **kwargs)
        held.append(out[0])
        return out

    monkeypatch.setattr(training, "fit_model", keep)
    method, data = resolve("recommended[epochs=2,tail_decisions=own]"), load_dataset("synthetic")
    out = _run_cdgt(RunSpec("synthetic", method, 0), data)
    model, config = held[0], method.config(0)
    assert model.decides_apart() and out["tail_decisions"]["weights"] == pytest.approx(
        [out[name]["decision_weight"] for name in ("neighbours", "encoder_neighbours", "centroids")])
    train, validation, test = (data.splits[s] for s in ("train", "validation", "test"))
    counts, _ = label_frequencies(train.labels, train.num_labels)
    want = evaluate_model(model, validation, test, counts, train.num_examples, config)
    for group in ("overall", "head", "tail"):
        assert out["metrics"][group] == pytest.approx(want.report[group], abs=1e-6, nan_ok=True), group
    # the decisions' own scores moved the F1 metrics: read from the ranking's, Macro-F1 is another figure
    (val_r, _), (test_r, _) = (predict_answers(model, s, config.batch_size) for s in (validation, test))
    ranking_alone = evaluate_probs(val_r, validation, test_r, test, counts, train.num_examples, config)
    assert out["metrics"]["overall"]["p_at_1"] == pytest.approx(ranking_alone.report["overall"]["p_at_1"])
    assert not np.isclose(out["metrics"]["overall"]["macro_f1"], ranking_alone.report["overall"]["macro_f1"])
