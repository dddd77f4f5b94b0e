"""Encoders and player heads (SPEC §3): small MLPs that accept dense or tf.SparseTensor input.

Keras' Dense layer multiplies a tf.SparseTensor by its kernel with a sparse gather-and-sum, so a
10^5..10^6-wide bag-of-words input is never densified (a test inspects the traced graph for this).

Example:
    >>> encoder = mlp((64,), activation="relu", dropout=0.1, name="encoder")
    >>> head = mlp((32,), activation="relu", dropout=0.1, output_units=10, name="player_1")
"""

from __future__ import annotations

import keras


def mlp(hidden: tuple[int, ...], *, activation: str, dropout: float, output_units: int | None = None,
        name: str) -> keras.Sequential:
    """Dense(hidden[k], activation) + Dropout per hidden size, then an optional linear output layer.

    With no hidden sizes and no output layer it is the identity (already-encoded features).
    """
    layers: list[keras.layers.Layer] = []
    for k, units in enumerate(hidden):
        layers.append(keras.layers.Dense(units, activation=activation, name=f"{name}_dense_{k}"))
        if dropout > 0:
            layers.append(keras.layers.Dropout(dropout, name=f"{name}_dropout_{k}"))
    if output_units is not None:
        layers.append(keras.layers.Dense(output_units, name=f"{name}_logits"))
    if not layers:
        layers.append(keras.layers.Identity(name=f"{name}_identity"))
    return keras.Sequential(layers, name=name)
