"""The blessing's labels: every label up to the cap, else one fixed sample shared by a candidate and its baseline."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from cdgt.pipeline.blessing import AUC_LABELS, add_blessing_arguments, blessing_label_ids


def test_every_label_up_to_the_cap():
    np.testing.assert_array_equal(blessing_label_ids(5, 5), np.arange(5))
    np.testing.assert_array_equal(blessing_label_ids(1, AUC_LABELS), [0])


def test_beyond_the_cap_a_fixed_sample_of_distinct_labels_in_range():
    ids = blessing_label_ids(18_607, 2_000)
    assert ids.dtype == np.int64 and len(ids) == 2_000 == len(np.unique(ids))
    assert np.all(np.diff(ids) > 0) and ids[0] >= 0 and ids[-1] < 18_607
    np.testing.assert_array_equal(ids, blessing_label_ids(18_607, 2_000))  # a rerun judges the same pairs
    # a uniform sample: each tenth of the label range holds about a tenth of it
    counts = np.bincount(ids * 10 // 18_607, minlength=10)
    assert counts.min() > 150 and counts.max() < 250, counts


@pytest.mark.parametrize("num_labels, cap", [(0, 10), (10, 0)])
def test_no_labels_is_an_error(num_labels, cap):
    with pytest.raises(ValueError, match="at least one label"):
        blessing_label_ids(num_labels, cap)


def test_the_cap_is_a_command_line_option():
    parser = argparse.ArgumentParser()
    add_blessing_arguments(parser)
    assert parser.parse_args([]).auc_labels == AUC_LABELS
    assert parser.parse_args(["--auc-labels", "500"]).auc_labels == 500
