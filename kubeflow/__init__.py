"""Kubeflow Pipelines V2 runner assets."""
