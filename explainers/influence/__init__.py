"""Training-data attribution: which training samples support or oppose a prediction (TracIn over the run's
checkpoints, or similar examples), and self-influence over the whole training set (possible label errors)."""

from xaidash.explainers.influence.api import (
    InfluenceResult,
    SelfInfluenceStatus,
    TrainingSample,
    explain_influence,
    run_self_influence,
    self_influence_status,
    self_influence_table,
)
from xaidash.explainers.influence.registry import (
    InfluenceMethodSpec,
    get_influence_method,
    influence_methods_for,
    list_influence_methods,
)

__all__ = [
    "InfluenceMethodSpec",
    "InfluenceResult",
    "SelfInfluenceStatus",
    "TrainingSample",
    "explain_influence",
    "get_influence_method",
    "influence_methods_for",
    "list_influence_methods",
    "run_self_influence",
    "self_influence_status",
    "self_influence_table",
]
