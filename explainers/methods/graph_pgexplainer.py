"""PGExplainer (Luo et al. 2020) through PyG's `PGExplainer`: a small network that reads the model's last node
embeddings at an edge's two ends (and the explained node's) and answers how much the edge matters, trained once on
the training split to keep the model's predicted classes with few edges. Values in [0, 1], edges only.

The explainer network is trained on first use for a run (PyG's `train`, one node or graph per step, as its
documentation does), saved under the run (`<run>/explainers/pgexplainer-<settings>.safetensors`, no pickle) and
read back on later calls; a model with no run folder keeps it in memory for the process and says so in the
diagnostics. Every input is then one PyG `Explainer` call (one forward pass)."""

from __future__ import annotations

import hashlib
import threading
import time
import warnings
import weakref
from pathlib import Path
from typing import Any

import torch

from xaidash.data.modalities.graph import centre_of, explained_subgraph
from xaidash.explainers.methods._graph import (
    GraphAttribution,
    as_it_was,
    edge_offsets,
    explainer,
    hops_of,
    pyg_view,
    task_of,
)
from xaidash.explainers.params import Param
from xaidash.explainers.registry import MethodContext, MethodOutput, MethodSpec, register
from xaidash.models.bundle import ModelBundle
from xaidash.models.zoo.graph_common import release_masks

# (id of a bundle, settings) -> (a weak reference to the bundle, the trained network's weights, its facts): what a
# model with no run folder keeps for the process (and what spares reading the file again for one with).
_TRAINED: dict[tuple[int, str], tuple[weakref.ref[ModelBundle], dict[str, torch.Tensor], dict[str, str]]] = {}
_LOCK = threading.Lock()


def _settings(params: dict[str, Any], seed: int) -> str:
    text = f"epochs={int(params['epochs'])};lr={float(params['lr'])};inputs={int(params['train_inputs'])};seed={seed}"
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def stored_path(bundle: ModelBundle, params: dict[str, Any], seed: int) -> Path | None:
    """Where the trained explainer of these settings is kept under the run (None: the model has no run folder)."""
    if bundle.run_dir is None:
        return None
    return Path(bundle.run_dir) / "explainers" / f"pgexplainer-{_settings(params, seed)}.safetensors"


def _algorithm(params: dict[str, Any]) -> Any:
    from torch_geometric.explain.algorithm import PGExplainer

    return PGExplainer(epochs=int(params["epochs"]), lr=float(params["lr"]))


def _training_inputs(bundle: ModelBundle, count: int, seed: int) -> tuple[Any, torch.Tensor, torch.Tensor]:
    """Up to `count` training inputs (a seeded pick) prepared: (batch, the model's predicted classes (N,), the
    picked inputs' centres (node task) or graph numbers)."""
    from xaidash.data.registry import load_split

    split = load_split(bundle.info.name, "train")
    gen = torch.Generator().manual_seed(int(seed))
    picked = torch.randperm(len(split), generator=gen)[: max(1, count)].sort().values.tolist()
    batch: Any = bundle.prepare(bundle.adapter.items(split, picked))
    with torch.no_grad():
        predicted = bundle.model(batch).argmax(1)
    centre = centre_of(batch)
    return batch, predicted, centre if centre is not None else batch.owner


def _train(ctx: MethodContext, params: dict[str, Any], pyg: Any) -> dict[str, str]:
    """PyG's training loop: every epoch, one step per picked training node (on its whole graph) or graph."""
    task, model = task_of(ctx.bundle), pyg_view(ctx.model)
    batch, predicted, where = _training_inputs(ctx.bundle, int(params["train_inputs"]), ctx.seed)
    algorithm, epochs, start = pyg.algorithm, int(params["epochs"]), time.perf_counter()
    if task == "node":
        target = torch.zeros(batch.num_nodes, dtype=torch.long, device=predicted.device)
        target[where] = predicted
    graphs = [] if task == "node" else [batch.get_example(int(g)) for g in where]
    loss = 0.0
    with warnings.catch_warnings():  # PyG's train returns float(loss) of a tensor that requires grad: harmless
        warnings.filterwarnings("ignore", message="Converting a tensor with requires_grad=True to a scalar")
        for epoch in range(epochs):
            for k in range(len(where)):
                if task == "node":
                    index = int(where[k])
                    loss = algorithm.train(epoch, model, batch.x, batch.edge_index, target=target, index=index)
                else:
                    g = graphs[k]
                    loss = algorithm.train(epoch, model, g.x, g.edge_index, target=predicted[k : k + 1])
    seconds = time.perf_counter() - start
    return {"epochs": str(epochs), "inputs": str(len(where)), "seconds": f"{seconds:.3f}", "loss": f"{loss:.6g}"}


def _load(pyg: Any, weights: dict[str, torch.Tensor], epochs: int, device: torch.device) -> None:
    """Trained weights into a fresh PGExplainer (its first layer is lazy: sized from the weights first)."""
    mlp = pyg.algorithm.mlp.to(device)
    with torch.no_grad():
        mlp(torch.zeros(1, int(weights["0.weight"].shape[1]), device=device))
    mlp.load_state_dict({k: v.to(device) for k, v in weights.items()})
    pyg.algorithm._curr_epoch = epochs - 1  # PyG's own mark of a trained explainer


def trained_explainer(ctx: MethodContext, params: dict[str, Any]) -> tuple[Any, dict[str, str], bool]:
    """PyG's Explainer with a trained PGExplainer: read from the run (or this process's memory), else trained now
    (and kept). Returns (explainer, its training facts, whether it was trained by this call)."""
    from xaidash.models.runs.checkpoint import read_tensors, save_weights

    bundle, key = ctx.bundle, _settings(params, ctx.seed)
    pyg = explainer(pyg_view(ctx.model), _algorithm(params), task_of(bundle), node_mask=None, edge_mask="object")
    path = stored_path(bundle, params, ctx.seed)
    with _LOCK:
        entry = _TRAINED.get((id(bundle), key))
    if entry is not None and entry[0]() is bundle:
        weights, facts = entry[1], entry[2]
    elif path is not None and path.is_file():
        weights, facts = read_tensors(path)
    else:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(ctx.seed))
            try:
                facts = _train(ctx, params, pyg)
            finally:
                release_masks(ctx.model)
        weights = {k: v.detach().cpu().clone() for k, v in pyg.algorithm.mlp.state_dict().items()}
        if path is not None:
            save_weights(pyg.algorithm.mlp, path, metadata=facts)
        _remember(bundle, key, weights, facts)
        return pyg, facts, True
    _remember(bundle, key, weights, facts)
    _load(pyg, weights, int(params["epochs"]), ctx.targets.device)
    return pyg, facts, False


def _remember(bundle: ModelBundle, key: str, weights: dict[str, torch.Tensor], facts: dict[str, str]) -> None:
    with _LOCK:
        if (id(bundle), key) not in _TRAINED:
            weakref.finalize(bundle, _TRAINED.pop, (id(bundle), key), None)
        _TRAINED[(id(bundle), key)] = (weakref.ref(bundle), weights, facts)


def _compute(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    pyg, facts, now = trained_explainer(ctx, params)
    batch: Any = ctx.x  # a PyG Batch
    centre = centre_of(batch)
    offsets, out = edge_offsets(batch), []
    target = torch.zeros(batch.num_nodes, dtype=torch.long, device=ctx.targets.device)
    if centre is not None:
        target[centre] = ctx.targets
    for i, raw in enumerate(ctx.raw):
        owner = int(batch.owner[i])
        _, edge_ids = explained_subgraph(raw, hops_of(ctx.bundle))
        if centre is not None:
            mask = pyg(batch.x, batch.edge_index, target=target, index=int(centre[i])).edge_mask
            values = mask[edge_ids.to(mask.device) + offsets[owner]]
        else:
            graph = batch.get_example(owner)
            values = pyg(graph.x, graph.edge_index, target=ctx.targets[i : i + 1]).edge_mask[edge_ids]
        out.append(GraphAttribution(None, values.detach().float().cpu()))
    n = len(out)
    kept = stored_path(ctx.bundle, params, ctx.seed) is not None
    return MethodOutput(
        out,
        {
            "training_epochs": [float(facts["epochs"])] * n,
            "training_inputs": [float(facts["inputs"])] * n,
            "training_seconds": [float(facts["seconds"])] * n,
            "trained_now": [float(now)] * n,
            "kept_under_run": [float(kept)] * n,  # 0: no run folder, the trained explainer lives in memory only
        },
    )


def _applies(bundle: ModelBundle) -> str | None:
    return bundle.no_dataset_reason("PGExplainer (it trains on the training split)")


register(
    MethodSpec(
        id="pgexplainer",
        label="PGExplainer",
        modalities=("graph",),
        compute=as_it_was(_compute),
        params=(
            Param("epochs", "int", 30, "Training epochs of the explainer network (PyG's example: 30).", min=1, max=500),
            Param("lr", "float", 0.003, "Learning rate of the explainer network's Adam optimiser.", min=1e-5, max=1.0),
            Param(
                "train_inputs",
                "int",
                100,
                "Training nodes (or graphs) it learns from, a seeded pick of the "
                "training split; each epoch takes one step per input.",
                min=1,
                max=100000,
            ),
        ),
        applies=_applies,
        description="A small network trained once per run on the training split to score each edge from the "
        "model's node embeddings, keeping the predicted class with few edges (PyG's PGExplainer). It reads the "
        "embeddings, not the target: the same map whatever class is asked. Values in [0, 1].",
        signed=False,
        family="perturbation",
        output="prediction",
    )
)
