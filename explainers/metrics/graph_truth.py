"""Graph maps scored against the motif and by PyG's own fidelity (registered in registry.py).

- Edge-mask ROC AUC: how well a map's edge values, by magnitude, rank the ground-truth motif's edges above the rest of
  the explained subgraph (scikit-learn's `roc_auc_score` of |value|; PyG's `groundtruth_metrics(..., 'auroc')` gives
  the same on |mask| through torchmetrics). Magnitude, as the GNNExplainer paper scores its gradient baseline: an edge
  that moves the target's logit either way is one the prediction depends on; masks (GNNExplainer, PGExplainer) are
  non-negative, so for them it is the AUC of the mask itself. The GNNExplainer paper's protocol: for a node task, only nodes that lie in a motif are scored (a base
  node's class is not explained by a house next to it); NaN where the subgraph's edges are all motif or all not.
- Fidelity+ / fidelity- and the characterization score (GraphFramEx, Amara et al. 2022), computed by PyG itself:
  `torch_geometric.explain.metric.fidelity` on an `Explainer` of the model (its `gnn`, PyG's convention) and an
  `Explanation` whose edge mask is the map's explanation made hard: the top `FIDELITY_SHARE` of the subgraph's edges by
  value (PyG's 'topk_hard' threshold). PyG masks an edge by multiplying its messages by the mask. Per input, fid+ is 1
  when the prediction leaves the target without those edges, fid- 1 when it leaves it with those edges alone
  ('phenomenon' form with the map's target, which is PyG's 'model' form where the target is the prediction)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import torch

from xaidash.data.modalities.graph import GraphInput, explained_subgraph
from xaidash.explainers.map_arrays import word_maps
from xaidash.explainers.modalities.graph_curves import edge_parts, hops_of, prepared
from xaidash.models.bundle import ModelBundle

FIDELITY_SHARE = 0.2  # the explanation's edges: this share of the explained subgraph's, highest values first


def has_edge_truth(raws: Sequence[Any]) -> bool:
    return any(getattr(getattr(r, "graph", None), "edge_truth", None) is not None for r in raws)


def edge_auc(bundle: ModelBundle, raws: Sequence[GraphInput], attributions: Any) -> np.ndarray:
    """Per input the ROC AUC of its map's |edge values| against the motif's edges of its subgraph (NaN: undefined)."""
    from sklearn.metrics import roc_auc_score

    out = []
    for inp, values in zip(raws, edge_parts(bundle, raws, word_maps(attributions)), strict=True):
        truth = getattr(inp.graph, "edge_truth", None)
        node_truth = getattr(inp.graph, "node_truth", None)
        outside = inp.node is not None and node_truth is not None and not bool(node_truth[inp.node])
        if truth is None or outside:
            out.append(math.nan)
            continue
        _, edges = explained_subgraph(inp, hops_of(bundle))
        t = torch.as_tensor(truth).bool()[edges].numpy()
        ok = t.any() and not t.all() and np.isfinite(values).all()
        out.append(float(roc_auc_score(t, np.abs(values))) if ok else math.nan)
    return np.asarray(out, np.float64)


def hard_mask(inp: GraphInput, hops: int, edge_values: np.ndarray, share: float = FIDELITY_SHARE) -> torch.Tensor:
    """(E,) float 0/1 over the input's whole graph: 1 on the top `share` of its subgraph's edges by value (at least
    one; ties: the first in edge order)."""
    _, edges = explained_subgraph(inp, hops)
    k = max(1, round(share * len(edges))) if len(edges) else 0
    top = edges[torch.from_numpy(np.argsort(-edge_values, kind="stable")[:k].copy())]
    mask = torch.zeros(inp.edges)
    mask[top] = 1.0
    return mask


def pyg_explainer(bundle: ModelBundle) -> Any:
    """A PyG `Explainer` of the model for fidelity (its algorithm never runs: fidelity reads the masks given)."""
    from torch_geometric.explain import Explainer
    from torch_geometric.explain.algorithm import DummyExplainer

    from xaidash.models.zoo.graph_common import PyGView

    task = bundle.info.graph.task if bundle.info.graph is not None else "graph"
    return Explainer(
        PyGView(cast(Any, bundle.model)),
        DummyExplainer(),
        explanation_type="phenomenon",
        edge_mask_type="object",
        node_mask_type=None,
        model_config={"mode": "multiclass_classification", "task_level": task, "return_type": "raw"},
    )


def graph_fidelity(
    bundle: ModelBundle, raws: Sequence[GraphInput], attributions: Any, targets: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    """(fid+, fid-) per input, each PyG's `fidelity` of the map's hard edge mask (see the module docstring)."""
    from torch_geometric.explain import Explanation
    from torch_geometric.explain.metric import fidelity

    explainer = pyg_explainer(bundle)
    plus, minus = [], []
    hops = hops_of(bundle)
    for inp, values, t in zip(raws, edge_parts(bundle, raws, word_maps(attributions)), targets, strict=True):
        batch = prepared(bundle, [inp])
        size = inp.nodes if inp.node is not None else 1
        explanation = Explanation(
            x=batch.x,
            edge_index=batch.edge_index,
            edge_mask=hard_mask(inp, hops, values).to(bundle.device),
            target=torch.full((size,), int(t), dtype=torch.long, device=bundle.device),
            index=inp.node,
        )
        explanation._model_args = []  # as `Explainer.__call__` sets it: no arguments beyond x and edge_index
        fp, fm = fidelity(explainer, explanation)
        plus.append(fp)
        minus.append(fm)
    return np.asarray(plus, np.float64), np.asarray(minus, np.float64)


def characterization(plus: np.ndarray, minus: np.ndarray) -> np.ndarray:
    """PyG's `characterization_score` (weights 0.5, 0.5) per input: 0 where fid+ is 0 or fid- is 1."""
    from torch_geometric.explain.metric import characterization_score

    with np.errstate(divide="ignore"):
        score = characterization_score(torch.as_tensor(plus), torch.as_tensor(minus))
    return np.nan_to_num(score.numpy().astype(np.float64), nan=0.0)
