"""What would change the answer: adversarial attacks within a pixel budget (captum.robust), how explanations move
under them, and counterfactuals (the smallest perturbation, or fewest word edits, that reaches a chosen class)."""

from xaidash.explainers.robust import attacks as _attacks  # noqa: F401  (registers FGSM and PGD)
from xaidash.explainers.robust.attack import AttackResult, attack
from xaidash.explainers.robust.counterfactual import Counterfactual, counterfactual
from xaidash.explainers.robust.explanation_change import MapChange, explanation_change, rank_correlation, top_k_overlap
from xaidash.explainers.robust.registry import AttackSpec, get_attack, list_attacks, register

__all__ = [
    "AttackResult",
    "AttackSpec",
    "Counterfactual",
    "MapChange",
    "attack",
    "counterfactual",
    "explanation_change",
    "get_attack",
    "list_attacks",
    "rank_correlation",
    "register",
    "top_k_overlap",
]
