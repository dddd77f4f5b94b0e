"""Choose the tf.distribute strategy for training from the environment (SPEC §6).

`TF_CONFIG` set (Kubeflow training operators, Vertex AI) → MultiWorkerMirroredStrategy; otherwise
MirroredStrategy over the local GPUs, or over the logical CPU devices when more than one is configured
(STACK.md item 4: configure them before TensorFlow initialises); otherwise the default strategy.

Example:
    >>> strategy = training_strategy()             # no TF_CONFIG: MirroredStrategy over the local devices
    >>> strategy.num_replicas_in_sync >= 1
    True
"""

from __future__ import annotations

import json
import os


def set_cpu_replicas(count: int) -> int:
    """Split the CPU into `count` logical devices (no-op for 1); returns the number of logical CPU devices.

    Call before TensorFlow creates any tensor (STACK.md item 4), e.g. `set_cpu_replicas(2)` first thing in a
    process to test MirroredStrategy on one machine; 1 is a no-op, safe at any time:
        >>> set_cpu_replicas(1) >= 1
        True
    """
    import tensorflow as tf

    if count < 1:
        raise ValueError(f"cpu replicas must be >= 1, got {count}")
    if count > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        try:
            tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * count)
        except RuntimeError as err:  # TensorFlow already initialised in this process
            raise RuntimeError(f"cannot make {count} CPU replicas: {err}") from None
    return len(tf.config.list_logical_devices("CPU"))


def training_strategy():
    """MultiWorkerMirroredStrategy under TF_CONFIG, else MirroredStrategy over local devices, else default."""
    import tensorflow as tf

    tf_config = os.environ.get("TF_CONFIG")
    if tf_config:
        cluster = json.loads(tf_config).get("cluster", {})
        if sum(len(v) for v in cluster.values()) > 1:
            return tf.distribute.MultiWorkerMirroredStrategy()
    gpus = tf.config.list_logical_devices("GPU")
    if len(gpus) > 1:
        return tf.distribute.MirroredStrategy([d.name for d in gpus])
    cpus = tf.config.list_logical_devices("CPU")
    if not gpus and len(cpus) > 1:
        return tf.distribute.MirroredStrategy([d.name for d in cpus])
    return tf.distribute.get_strategy()
