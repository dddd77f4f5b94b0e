"""Sparse-input training whose step costs what the batch's non-zeros cost, not the vocabulary.

- `SparseDense`: keras.layers.Dense that multiplies a tf.SparseTensor batch by its kernel through the rows of the
  batch's distinct features only (`sparse_matmul`). Its kernel gradient is a tf.IndexedSlices over those rows
  (Keras' own Dense uses sparse_dense_matmul on the whole kernel, whose gradient is a dense [V, H] matrix).
  With `dense_columns`, the input's leading columns (a text embedding's, filled in every row) are multiplied as
  a dense block instead (`split_matmul`, `leading_block`).
- `InputDropout`: dropout of the input's entries (a tf.SparseTensor's stored values, or a dense input's cells).
- `LazyAdam`: keras.optimizers.Adam that updates only the rows an IndexedSlices gradient names (the moments of
  absent rows are left as they are, as TF Addons' LazyAdam), in one pass by cdgt's fused kernel where it builds;
  dense gradients take Keras' Adam unchanged.
- `SparseAdagrad`: Adagrad through TF's fused kernels, on the named rows only for a tf.IndexedSlices gradient.

Example:
    >>> layer = SparseDense(4)
    >>> x = tf.sparse.from_dense(tf.constant([[0.0, 2.0, 0.0], [1.0, 0.0, 0.0]]))
    >>> y = layer(x)                      # == x @ kernel + bias
    >>> tuple(y.shape)
    (2, 4)
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import keras
import tensorflow as tf

from cdgt_keras.kernels import adam_dense, in_portable_graphs, lazy_adam_rows, leading_split

tf.no_gradient("CdgtLeadingSplit")  # it splits an input: nothing to differentiate


def _kernel_tensor(kernel: Any) -> Any:
    """The tf.Variable behind a Keras variable (gather on it gives an IndexedSlices gradient), else `kernel`."""
    return kernel.value if isinstance(kernel, keras.Variable) else kernel


def sparse_matmul(x: tf.SparseTensor, kernel: Any, offset: int = 0) -> tf.Tensor:
    """x [B, V] (sparse) @ kernel[offset:offset + V] [V, H], through the U distinct features of the batch: their
    kernel rows [U, H] are gathered once and multiplied by x with its columns renumbered 0..U-1 ([B, U], sparse).
    The gradient is then one [U, H] block of row slices (tf.IndexedSlices, each row once), and no [nnz, H] tensor
    is made, forward or backward: on debtags' batches (256 documents, 22k entries, 100k x 512 kernel) the
    forward and backward take about a tenth of the time of a gather of every entry's row and a per-example sum.
    """
    cols, position = tf.unique(x.indices[:, 1])
    local = tf.SparseTensor(tf.stack([x.indices[:, 0], tf.cast(position, tf.int64)], axis=1),
                            tf.cast(x.values, tf.float32), tf.stack([x.dense_shape[0], tf.size(cols, tf.int64)]))
    rows = cols + offset if offset else cols
    return tf.sparse.sparse_dense_matmul(local, tf.gather(_kernel_tensor(kernel), rows))


def split_leading(x: tf.SparseTensor, n: int) -> tuple[tf.Tensor, tf.SparseTensor]:
    """x's first n columns as a dense float32 [B, n] tensor (absent entries 0), and its other columns as a sparse
    [B, width - n] batch (column ids less n, values float32, in x's order): the text embedding's columns, which
    every row fills, cost a dense product less than the sparse road's gather and renumbering. One pass of cdgt's
    kernel (`cdgt_keras.kernels.leading_split`) where it is built and the graph may name it; else TensorFlow's
    slices and densification, the reference (the same values).

        >>> x = tf.sparse.from_dense(tf.constant([[1.0, 0.0, 3.0], [0.0, 2.0, 0.0]]))
        >>> block, rest = split_leading(x, 2)
        >>> block.numpy().tolist(), tf.sparse.to_dense(rest).numpy().tolist()
        ([[1.0, 0.0], [0.0, 2.0]], [[3.0], [0.0]])
    """
    rows, width = x.dense_shape[0], x.dense_shape[1]
    values = tf.cast(x.values, tf.float32)  # as sparse_matmul reads any input's values
    op = None if in_portable_graphs() else leading_split()
    if op is not None:
        block, at, kept = op(indices=x.indices, values=values, dense_shape=x.dense_shape, n=int(n))
        return block, tf.SparseTensor(at, kept, tf.stack([rows, width - n]))
    x = tf.SparseTensor(x.indices, values, x.dense_shape)
    lead = tf.sparse.slice(x, [0, 0], tf.stack([rows, tf.constant(n, tf.int64)]))
    return tf.sparse.to_dense(lead), tf.sparse.slice(x, tf.constant([0, n], tf.int64), tf.stack([rows, width - n]))


def leading_block(x: tf.SparseTensor, n: int) -> tf.Tensor:
    """x's first n columns as a dense float32 [B, n] tensor (`split_leading`'s block).

        >>> x = tf.sparse.from_dense(tf.constant([[1.0, 0.0, 3.0], [0.0, 2.0, 0.0]]))
        >>> leading_block(x, 2).numpy().tolist()
        [[1.0, 0.0], [0.0, 2.0]]
    """
    return split_leading(x, n)[0]


def split_matmul(x: tf.SparseTensor, kernel: Any, n: int) -> tf.Tensor:
    """x [B, V] (sparse) @ kernel [V, H] as the dense product of x's first n columns with the kernel's first n
    rows plus `sparse_matmul` of the other columns with the other rows (the same sum, in another order). The
    kernel's gradient stays row slices (the first n rows' block, then the batch's other features' rows), so a
    row-wise optimizer still touches only those rows.

        >>> x = tf.sparse.from_dense(tf.constant([[1.0, 0.0, 3.0], [0.0, 2.0, 0.0]]))
        >>> kernel = tf.constant([[1.0], [10.0], [100.0]])
        >>> split_matmul(x, kernel, 2).numpy().tolist()   # == x @ kernel
        [[301.0], [20.0]]
    """
    block, rest = split_leading(x, n)
    lead = tf.matmul(block, tf.gather(_kernel_tensor(kernel), tf.range(n)))
    return lead + sparse_matmul(rest, kernel, offset=n)


def bfloat16_matmul(x: tf.Tensor, kernel: Any) -> tf.Tensor:
    """x [B, K] @ kernel [K, H] with both rounded to bfloat16, the products summed in float32 (oneDNN's bfloat16
    kernels: AMX or AVX512-BF16 where the CPU has them), the result rounded to bfloat16 and returned as float32.
    Its gradients take the same road (the cast's gradient casts back), so both of a training step's products of a
    player's output layer cost about half of float32's on such a CPU.

        >>> x, k = tf.constant([[1.0, 2.0]]), tf.constant([[0.5], [0.25]])
        >>> bfloat16_matmul(x, k).numpy().tolist()   # values exact in bfloat16 give the float32 answer
        [[1.0]]
    """
    product = tf.matmul(tf.cast(x, tf.bfloat16), tf.cast(_kernel_tensor(kernel), tf.bfloat16))
    return tf.cast(product, tf.float32)


def bfloat16_backward_matmul(x: tf.Tensor, kernel: Any) -> tf.Tensor:
    """x [B, K] @ kernel [K, H] in float32, its two gradients' products as `bfloat16_matmul`'s (the upstream
    gradient, x and the kernel rounded to bfloat16, the products summed in float32, the results rounded).

        >>> x, k = tf.constant([[1.0, 2.0]]), tf.constant([[0.5], [0.25]])
        >>> bfloat16_backward_matmul(x, k).numpy().tolist()
        [[1.0]]
    """

    @tf.custom_gradient
    def product(a: tf.Tensor, b: tf.Tensor) -> tuple[tf.Tensor, Any]:
        def gradient(upstream: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            low = tf.cast(upstream, tf.bfloat16)
            da = tf.matmul(low, tf.cast(b, tf.bfloat16), transpose_b=True)
            db = tf.matmul(tf.cast(a, tf.bfloat16), low, transpose_a=True)
            return tf.cast(da, tf.float32), tf.cast(db, tf.float32)

        return tf.matmul(a, b), gradient

    return product(tf.convert_to_tensor(x, tf.float32), _kernel_tensor(kernel))


@functools.cache
def bfloat16_supported() -> bool:
    """Whether this CPU has the instructions TensorFlow's oneDNN bfloat16 products run on (AVX512-BF16 or AMX, read
    from /proc/cpuinfo). Without them a bfloat16 product does not fall back: oneDNN fails to create it and the
    process dies, so this is read from the CPU's flags, not tried."""
    try:
        with open("/proc/cpuinfo") as info:
            flags = next((line for line in info if line.startswith("flags")), "").split()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


# A dense input's product in training, by `training_precision` (inference is always float32's).
PRECISIONS: dict[str, Any] = {"float32": None, "bfloat16": bfloat16_matmul,
                              "bfloat16_backward": bfloat16_backward_matmul}


@keras.saving.register_keras_serializable(package="cdgt")
class SparseDense(keras.layers.Dense):
    """Dense whose sparse-input product is `sparse_matmul` (dense inputs: Keras' Dense unchanged).

    `training_precision="bfloat16"`: in training, a dense input is multiplied by `bfloat16_matmul`
    ("bfloat16_backward": `bfloat16_backward_matmul`, the forward product in float32); inference (validation,
    evaluation, serving) keeps float32, and the weights and their updates are float32 throughout.
    """

    def __init__(self, *args: Any, training_precision: str = "float32", dense_columns: int = 0, **kwargs: Any):
        super().__init__(*args, **kwargs)
        # A sparse input's first `dense_columns` columns (the text embedding's) are multiplied as a dense block
        # (`split_matmul`); 0: the whole input on the sparse road (`sparse_matmul`).
        self.dense_columns = int(dense_columns)
        if training_precision not in PRECISIONS:
            raise ValueError(f"training_precision={training_precision!r} is not allowed; expected one of "
                             f"{', '.join(PRECISIONS)}")
        self.training_precision = training_precision
        # what the training product runs in here: float32, with a warning, where the CPU has no bfloat16 kernels
        self.effective_precision = training_precision
        if training_precision != "float32" and not bfloat16_supported():
            self.effective_precision = "float32"
            warnings.warn(f"cdgt: this CPU cannot multiply in bfloat16 (no AVX512-BF16 or AMX kernels); {self.name}'s "
                          f"training products run in float32 instead of {training_precision!r}", RuntimeWarning,
                          stacklevel=2)

    def build(self, input_shape: Any) -> None:
        width = input_shape[-1]
        if self.dense_columns and width is not None and self.dense_columns > width:
            raise ValueError(f"{self.name}: dense_columns={self.dense_columns} is more than the input's {width} "
                             "columns")
        super().build(input_shape)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "training_precision": self.training_precision,
                "dense_columns": self.dense_columns}

    def call(self, inputs: Any, training: bool | None = None) -> Any:
        if not isinstance(inputs, tf.SparseTensor):
            if not training or self.effective_precision == "float32":
                return super().call(inputs, training=training)
            x = PRECISIONS[self.effective_precision](inputs, self.kernel)
        elif self.dense_columns:
            x = split_matmul(inputs, self.kernel, self.dense_columns)
        else:
            x = sparse_matmul(inputs, self.kernel)
        if self.bias is not None:
            x = x + self.bias
        return self.activation(x) if self.activation is not None else x

    def call_columns(self, inputs: Any, columns: tf.Tensor, training: bool | None = None) -> Any:
        """`call` on the output columns `columns` only [B, len(columns)]: the product with those columns of the
        kernel (a dense float32 input; otherwise the whole output, then the columns)."""
        if isinstance(inputs, tf.SparseTensor) or (training and self.effective_precision != "float32"):
            return tf.gather(self.call(inputs, training=training), columns, axis=1)
        x = tf.matmul(inputs, tf.gather(self.kernel, columns, axis=1))
        if self.bias is not None:
            x = x + tf.gather(self.bias, columns)
        return self.activation(x) if self.activation is not None else x


@keras.saving.register_keras_serializable(package="cdgt")
class InputDropout(keras.layers.Layer):
    """In training, each input entry is dropped with probability `rate` and the kept ones scaled by 1/(1-rate);
    at inference the input passes unchanged. A tf.SparseTensor keeps its sparsity (dropped entries are removed),
    so a bag-of-words document loses a random share of its words each step: the encoder cannot lean on one
    keyword, which is how a wide layer over 10^5 features overfits a few thousand documents.

        >>> x = tf.sparse.from_dense(tf.ones([2, 1000]))
        >>> kept = InputDropout(0.5, seed=1)(x, training=True)
        >>> 900 < int(tf.size(kept.values)) < 1100, float(tf.reduce_max(kept.values))   # about half, scaled by 2
        (True, 2.0)
    """

    def __init__(self, rate: float, seed: int | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"input_dropout={rate!r} is not allowed; expected a number in [0, 1)")
        self.rate, self.seed = float(rate), seed
        self.seed_generator = keras.random.SeedGenerator(seed)

    def call(self, inputs: Any, training: bool = False) -> Any:
        if not training or self.rate == 0.0:
            return inputs
        if not isinstance(inputs, tf.SparseTensor):
            return keras.random.dropout(inputs, self.rate, seed=self.seed_generator)
        keep = keras.random.uniform(tf.shape(inputs.values), seed=self.seed_generator) >= self.rate
        kept = tf.sparse.retain(inputs, keep)
        return tf.SparseTensor(kept.indices, kept.values / (1.0 - self.rate), kept.dense_shape)

    def compute_output_shape(self, input_shape: Any) -> Any:
        return input_shape

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "rate": self.rate, "seed": self.seed}


def _summed_rows(gradient: tf.IndexedSlices, dtype: Any) -> tuple[tf.Tensor, tf.Tensor]:
    """(rows, values) of an IndexedSlices gradient with each row once, duplicates summed. The gradient of
    `sparse_matmul` names each of the batch's features once already; then the values pass as they are (summing a
    [U, H] block into itself would be one more pass over it and one more block in memory).

        >>> g = tf.IndexedSlices(tf.constant([[1.0], [2.0], [4.0]]), tf.constant([5, 3, 5]))
        >>> [t.numpy().ravel().tolist() for t in _summed_rows(g, tf.float32)]
        [[5, 3], [5.0, 2.0]]
    """
    rows, position = tf.unique(gradient.indices)
    values = tf.cast(gradient.values, dtype)
    return rows, tf.cond(tf.size(rows) < tf.size(gradient.indices),
                         lambda: tf.math.unsorted_segment_sum(values, position, tf.size(rows)), lambda: values)


@keras.saving.register_keras_serializable(package="cdgt")
class LazyAdam(keras.optimizers.Adam):
    """Adam; a tf.IndexedSlices gradient updates only its rows (duplicates summed first).

    The rows' update runs in one pass through cdgt's fused kernel (`cdgt_keras.kernels`) when it can be built, else
    through TensorFlow's ops (a dozen passes: gathers, element-wise kernels, three scatters); both do the same float
    operations in the same order and give the same bits. A dense gradient takes Keras' Adam, in one pass through
    cdgt's other kernel when built (the same bits as Keras' ops). `fused = False` on an instance keeps to the ops.

        >>> var = keras.Variable([[1.0], [1.0]])
        >>> _ = LazyAdam(0.5).apply_gradients([(tf.IndexedSlices(tf.constant([[2.0]]), tf.constant([1])), var)])
        >>> [round(float(w), 4) for w in var.numpy().ravel()]     # row 1: Adam's first step, 0.5 down; row 0 untouched
        [1.0, 0.5]
    """

    fused = True

    def _alpha(self, variable: Any, learning_rate: Any) -> tf.Tensor:
        """Adam's step at this iteration, lr sqrt(1 - beta_2^t) / (1 - beta_1^t), computed as Keras computes it."""
        lr = tf.cast(learning_rate, variable.dtype)
        step = tf.cast(self.iterations + 1, variable.dtype)
        beta_1, beta_2 = tf.cast(self.beta_1, variable.dtype), tf.cast(self.beta_2, variable.dtype)
        return lr * tf.sqrt(1 - tf.pow(beta_2, step)) / (1 - tf.pow(beta_1, step))

    def _dense_step(self, gradient: Any, variable: Any, learning_rate: Any) -> None:
        """Keras' Adam on a dense gradient, in one pass through cdgt's kernel when it is built (the same bits)."""
        fused_op = adam_dense() if self.fused and variable.dtype == "float32" and not self.amsgrad else None
        if fused_op is None:
            return super().update_step(gradient, variable, learning_rate)
        index = self._get_variable_index(variable)
        m, v = self._momentums[index], self._velocities[index]
        fused_op(var=_kernel_tensor(variable).handle, m=_kernel_tensor(m).handle, v=_kernel_tensor(v).handle,
                 grad=tf.cast(gradient, variable.dtype), alpha=self._alpha(variable, learning_rate),
                 keep_1=tf.constant(1 - self.beta_1, tf.float32), keep_2=tf.constant(1 - self.beta_2, tf.float32),
                 epsilon=tf.constant(self.epsilon, tf.float32))
        return None

    def update_step(self, gradient: Any, variable: Any, learning_rate: Any) -> None:
        if not isinstance(gradient, tf.IndexedSlices):
            return self._dense_step(gradient, variable, learning_rate)
        rows, values = _summed_rows(gradient, variable.dtype)
        beta_1, beta_2 = tf.cast(self.beta_1, variable.dtype), tf.cast(self.beta_2, variable.dtype)
        epsilon = tf.cast(self.epsilon, variable.dtype)
        alpha = self._alpha(variable, learning_rate)
        index = self._get_variable_index(variable)
        m, v = self._momentums[index], self._velocities[index]
        fused_op = lazy_adam_rows() if self.fused and variable.dtype == "float32" else None
        if fused_op is not None:
            fused_op(var=_kernel_tensor(variable).handle, m=_kernel_tensor(m).handle, v=_kernel_tensor(v).handle,
                     rows=rows, grad=values, alpha=alpha, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon)
            return None
        m_rows = beta_1 * tf.gather(_kernel_tensor(m), rows) + (1 - beta_1) * values
        v_rows = beta_2 * tf.gather(_kernel_tensor(v), rows) + (1 - beta_2) * tf.square(values)
        # The static shape: tf.shape() of the variable would read its whole value, and a scatter into a
        # variable whose value is held by a read copies all of it first (a 100k x 512 kernel: 200 MB per step).
        shape = tf.constant(tuple(variable.shape), dtype=rows.dtype)
        self.assign(m, tf.IndexedSlices(m_rows, rows, shape))
        self.assign(v, tf.IndexedSlices(v_rows, rows, shape))
        step_rows = alpha * m_rows / (tf.sqrt(v_rows) + epsilon)
        self.assign_sub(variable, tf.IndexedSlices(step_rows, rows, shape))
        return None


@keras.saving.register_keras_serializable(package="cdgt")
class SparseAdagrad(keras.optimizers.Adagrad):
    """Adagrad whose every update is one fused TF kernel (ResourceApplyAdagradV2, or ResourceSparseApplyAdagradV2
    on the rows a tf.IndexedSlices gradient names, duplicates summed first):

        accumulator += g ** 2;    variable -= learning_rate * g / (sqrt(accumulator) + epsilon)

    A row's step shrinks with its own accumulated gradient, so the first layer's rows of rare input features keep
    a large step while frequent ones settle (the reason sparse models train their embeddings with Adagrad). The
    fused kernel updates a batch's rows in one pass: about a fifth of LazyAdam's gathers, arithmetic and scatters
    on debtags' 11k rows of 512 (`cdgt bench profile`).

        >>> var = keras.Variable([[1.0], [1.0]])
        >>> opt = SparseAdagrad(0.5, initial_accumulator_value=0.0, epsilon=0.0)
        >>> _ = opt.apply_gradients([(tf.IndexedSlices(tf.constant([[2.0]]), tf.constant([1])), var)])
        >>> [float(w) for w in var.numpy().ravel()]    # row 1: 1 - 0.5 * 2 / sqrt(4); row 0 untouched
        [1.0, 0.5]
    """

    def update_step(self, gradient: Any, variable: Any, learning_rate: Any) -> None:
        accumulator = self._accumulators[self._get_variable_index(variable)]
        lr = tf.cast(learning_rate, variable.dtype)
        epsilon = tf.cast(self.epsilon, variable.dtype)
        var_handle, acc_handle = _kernel_tensor(variable).handle, _kernel_tensor(accumulator).handle
        if not isinstance(gradient, tf.IndexedSlices):
            tf.raw_ops.ResourceApplyAdagradV2(var=var_handle, accum=acc_handle, lr=lr, epsilon=epsilon,
                                              grad=tf.cast(gradient, variable.dtype))
            return None
        rows, values = _summed_rows(gradient, variable.dtype)
        tf.raw_ops.ResourceSparseApplyAdagradV2(var=var_handle, accum=acc_handle, lr=lr, epsilon=epsilon,
                                                grad=values, indices=rows)
        return None


@keras.saving.register_keras_serializable(package="cdgt")
class SparseRMSprop(keras.optimizers.RMSprop):
    """Adam's arithmetic through RMSProp's fused TF kernel (ResourceApplyRMSProp, or ResourceSparseApplyRMSProp on
    the rows a tf.IndexedSlices gradient names, duplicates summed first), with momentum:

        ms  = rho * ms + (1 - rho) * g ** 2
        mom = momentum * mom + rate * g / sqrt(ms + epsilon)
        variable -= mom,    rate = learning_rate * (1 - momentum) * sqrt(1 - rho ** t)

    which is Adam (beta_1 = momentum, beta_2 = rho) but for where the momentum is taken: of the scaled gradient
    here, of the gradient in Adam. The rate's two factors make `learning_rate` mean what it means for Adam once
    the momentum has filled: its sum of (1 - momentum)-weighted steps, and the correction of `ms`'s start at 0
    (by the global step t, as LazyAdam corrects a row seen for the first time late). The momentum's own start at 0
    is not corrected (it cannot be, inside the kernel): a row's first step is (1 - momentum) of Adam's, a warm-up
    over about 1 / (1 - momentum) of its steps. There is no fused Adam kernel in TensorFlow; this one updates a
    batch's rows in one pass where LazyAdam makes a dozen.

        >>> var = keras.Variable([[1.0], [1.0]])
        >>> opt = SparseRMSprop(0.5, rho=0.75, momentum=0.5, epsilon=0.0)
        >>> _ = opt.apply_gradients([(tf.IndexedSlices(tf.constant([[2.0]]), tf.constant([1])), var)])
        >>> [float(w) for w in var.numpy().ravel()]    # row 1: 1 - 0.5 * 0.5 * sqrt(0.25) * 2 / sqrt(0.25 * 4)
        [1.0, 0.75]
    """

    def __init__(self, learning_rate: Any = 0.001, rho: float = 0.999, momentum: float = 0.9,
                 epsilon: float = 1e-12, **kwargs: Any):
        if not 0.0 < momentum < 1.0:
            raise ValueError(f"SparseRMSprop needs 0 < momentum < 1, got {momentum}")
        kwargs.pop("centered", None)  # from get_config: always False here
        super().__init__(learning_rate=learning_rate, rho=rho, momentum=momentum, epsilon=epsilon, centered=False,
                         **kwargs)

    def update_step(self, gradient: Any, variable: Any, learning_rate: Any) -> None:
        index = self._get_variable_index(variable)
        dtype = variable.dtype
        step = tf.cast(self.iterations + 1, dtype)
        rho, momentum = tf.cast(self.rho, dtype), tf.cast(self.momentum, dtype)
        rate = tf.cast(learning_rate, dtype) * (1 - momentum) * tf.sqrt(1 - tf.pow(rho, step))
        handles = {"var": _kernel_tensor(variable).handle, "ms": _kernel_tensor(self._velocities[index]).handle,
                   "mom": _kernel_tensor(self._momentums[index]).handle}
        scalars = {"lr": rate, "rho": rho, "momentum": momentum, "epsilon": tf.cast(self.epsilon, dtype)}
        if not isinstance(gradient, tf.IndexedSlices):
            tf.raw_ops.ResourceApplyRMSProp(**handles, **scalars, grad=tf.cast(gradient, dtype))
            return None
        rows, values = _summed_rows(gradient, dtype)
        tf.raw_ops.ResourceSparseApplyRMSProp(**handles, **scalars, grad=values, indices=rows)
        return None
