"""The Evaluator's baseline: the latest blessed model other than the candidate itself.

Why not TFX's LatestBlessedModelStrategy alone: on an unchanged rerun the Trainer comes from the cache, so the
latest blessed model *is* the candidate. The baseline input then changes (none on the first run -> the
candidate itself), the Evaluator misses its cache, compares the model with itself, blesses it again, and the
Pusher pushes a second serving version of the same model. Leaving the candidate out makes a rerun resolve the
same baseline as the run that trained the model, so the Evaluator and the Pusher come from the cache; a model
is never its own baseline.

Kubeflow V2 compiles only TFX's own resolver strategies (its step builder checks the class), so
pipeline.create_pipeline uses this one where it runs the pipeline itself (LocalDagRunner) and the stock
strategy for Kubeflow.

Example (inside a pipeline):
    >>> resolver = tfx.dsl.Resolver(
    ...     strategy_class=LatestBlessedOtherModelStrategy,
    ...     model=tfx.dsl.Channel(type=standard_artifacts.Model),
    ...     model_blessing=tfx.dsl.Channel(type=standard_artifacts.ModelBlessing),
    ...     candidate=trainer.outputs["model"])   # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from tfx.dsl.input_resolution.strategies.latest_blessed_model_strategy import LatestBlessedModelStrategy

CANDIDATE_KEY = "candidate"


class LatestBlessedOtherModelStrategy(LatestBlessedModelStrategy):
    """LatestBlessedModelStrategy over every model except those in the `candidate` input."""

    def resolve_artifacts(self, store: Any, input_dict: dict[str, list[Any]]) -> dict[str, list[Any]] | None:
        candidates = input_dict.get(CANDIDATE_KEY, [])
        excluded = {artifact.id for artifact in candidates}
        rest = {key: [a for a in artifacts if a.id not in excluded]  # MLMD ids are unique across types
                for key, artifacts in input_dict.items() if key != CANDIDATE_KEY}
        result = super().resolve_artifacts(store, rest)
        if result is None:
            return None
        return {**result, CANDIDATE_KEY: list(candidates)}
