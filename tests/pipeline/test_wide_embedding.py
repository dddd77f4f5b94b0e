"""`wide_input="embedding"` on text data: `cdgt train`'s road (pipeline.train.load_features, then fit_model)
marks the text embedding's columns on every split and the wide parts read those alone; the TFX Trainer sizes the
same cut from the config (pipeline/trainer_module.py), and the two agree; the neighbour votes in the input's space
keep those columns as a dense block."""

from __future__ import annotations

from pathlib import Path

from conftest import write_debian_catalogue

from cdgt.pipeline.datasets import DATASETS, build_named
from cdgt.pipeline.train import load_features
from cdgt_keras.config import CDGTConfig
from cdgt_keras.text import TextOptions
from cdgt_keras.text_embedding import embedding_width
from cdgt_keras.training import fit_model


def test_the_wide_parts_read_the_embedding_columns_of_built_text_data(tmp_path: Path, monkeypatch):
    from cdgt_keras.sentence import _tiny_checkpoint

    monkeypatch.setenv("CDGT_CACHE_DIR", str(tmp_path / "embeddings"))
    root = tmp_path / "data"
    write_debian_catalogue(root / DATASETS["debtags"].source)
    built = build_named("debtags", tmp_path / "cache", root=root)
    config = CDGTConfig(text_embedding=_tiny_checkpoint(str(tmp_path / "bert")), text_embedding_tokens=16,
                        text_min_df=1, wide="all", wide_input="embedding", n_players=2, encoder_hidden=(4,),
                        head_hidden=(), epochs=1, batch_size=8, neighbours=3)
    splits, featurizer = load_features(built, "debtags", config)
    assert featurizer.width == 8 + len(featurizer.text.vocabulary)  # the tiny checkpoint's 8 columns, then TF-IDF
    assert {name: split.embedding_columns for name, split in splits.items()} == {
        "train": 8, "validation": 8, "test": 8}
    assert embedding_width(TextOptions.from_config(config)) == 8  # what the TFX Trainer cuts at
    model, _, _ = fit_model(config, splits["train"], splits["validation"])
    assert model.wide_columns == 8
    assert model.neighbours.shape.dense_columns == 8  # the input-space votes keep the embedding as a dense block
    assert model.neighbours.x_block.shape == (splits["train"].num_examples, 8)
    assert all(tuple(part.kernel.shape) == (8, labels.size)
               for part, labels in zip(model.wide, model.layout.player_labels))
