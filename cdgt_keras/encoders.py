"""Encoders and player heads (SPEC §3): small MLPs that accept dense or tf.SparseTensor input.

The layers are `SparseDense` (cdgt_keras/sparse.py): a tf.SparseTensor batch is multiplied by the kernel as a
gather of the present rows and a per-example sum, so a 10^5..10^6-wide bag-of-words input is never densified and
the kernel's gradient touches only the rows of the batch's features. (A keras.Sequential would be: its InputLayer
converts a sparse batch to dense, hence this small layer; a test inspects the traced graph.)

Example:
    >>> encoder = MLP((64,), activation="relu", dropout=0.1, input_dropout=0.2, name="encoder")
    >>> head = MLP((32,), activation="relu", dropout=0.1, output_units=10, name="player1_head")
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np

from cdgt_keras.sparse import InputDropout, SparseDense


class MLP(keras.layers.Layer):
    """Optional input dropout, then Dense(hidden[k], activation) + Dropout per hidden size, then an optional linear
    output layer (its bias starts at `output_bias` [output_units] when given, else 0). `training_precision`: the
    dense products' precision in training (`SparseDense`); a sparse input's product stays float32.
    `dense_columns`: the leading columns of a sparse input that the first Dense multiplies as a dense block.

    With no hidden sizes and no output layer it is the identity (already-encoded features).
    """

    def __init__(self, hidden: tuple[int, ...], *, activation: str, dropout: float,
                 output_units: int | None = None, output_bias: Any = None, input_dropout: float = 0.0,
                 training_precision: str = "float32", dense_columns: int = 0, **kwargs: Any):
        super().__init__(**kwargs)
        self.blocks: list[keras.layers.Layer] = []
        if input_dropout > 0:
            self.blocks.append(InputDropout(input_dropout, name=f"{self.name}_input_dropout"))
        for k, units in enumerate(hidden):
            self.blocks.append(SparseDense(units, activation=activation, training_precision=training_precision,
                                           dense_columns=dense_columns if k == 0 else 0,
                                           name=f"{self.name}_dense_{k}"))
            if dropout > 0:
                self.blocks.append(keras.layers.Dropout(dropout, name=f"{self.name}_dropout_{k}"))
        self.has_output = output_units is not None
        if output_units is not None:
            init = "zeros" if output_bias is None else keras.initializers.Constant(np.asarray(output_bias, "float32"))
            self.blocks.append(SparseDense(output_units, bias_initializer=init, training_precision=training_precision,
                                           name=f"{self.name}_logits"))

    @property
    def layers(self) -> list[keras.layers.Layer]:
        """The Dense / Dropout layers in order (as keras.Sequential.layers)."""
        return list(self.blocks)

    def build(self, input_shape: Any) -> None:
        shape = input_shape
        for layer in self.blocks:
            layer.build(shape)
            shape = layer.compute_output_shape(shape)
        self.built = True

    def compute_output_shape(self, input_shape: Any) -> Any:
        shape = input_shape
        for layer in self.blocks:
            shape = layer.compute_output_shape(shape)
        return shape

    def call(self, inputs: Any, training: bool = False) -> Any:
        return _through(self.blocks, inputs, training)

    def call_columns(self, inputs: Any, columns: Any, training: bool = False) -> Any:
        """`call` on the output layer's columns `columns` only (the hidden layers run whole)."""
        if not self.has_output:
            raise ValueError(f"{self.name} has no output layer to take columns of")
        return self.blocks[-1].call_columns(_through(self.blocks[:-1], inputs, training), columns, training=training)


def _through(layers: list[keras.layers.Layer], x: Any, training: bool) -> Any:
    """x through `layers` in order, the dropouts told whether this is training."""
    for layer in layers:
        x = layer(x, training=training) if isinstance(layer, (keras.layers.Dropout, InputDropout)) else layer(x)
    return x
