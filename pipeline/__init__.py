"""Wiring and entry points: the TFX pipeline, its runners, `cdgt train` and the `cdgt` CLI."""
