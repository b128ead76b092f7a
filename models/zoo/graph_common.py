"""What the graph models (gcn, sage, gin, gat) share: a stack of message-passing layers, each followed by its own
nonlinearity and dropout module; for a node task a linear layer over the node's embeddings (every layer's output
concatenated by default, the GNNExplainer paper's model), for a graph task a readout over each graph's nodes (global
mean or sum, its own module) and an MLP head, as the course describes.

`forward(batch)` reads the graph modality's prepared batch (a PyG `Batch` with `centre` for a node task, `owner` for
every input) and answers (N, classes), one row per input, so the bundle, the training loop and the pages stay
generic; `gnn(x, edge_index, batch=None)` is the same network in PyG's convention (node logits, or graph logits with
`batch`), what `torch_geometric.explain` calls (through `PyGView`); `embed(x, edge_index)` gives every layer's node
embeddings (the Embeddings page).

torch_geometric is imported inside the functions: only graph models need it and it takes seconds to import."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from xaidash.data.modalities.graph import centre_of
from xaidash.data.registry import GRAPH_TASKS, DatasetInfo
from xaidash.models.registry import DROPOUT, ModelOption, ModelSpec, register
from xaidash.models.training.recipes import Recipe

HIDDEN = 20
LAYERS = 3
# conv(in, out) makes one message-passing layer: what the models differ in (with GAT's ELU).
ConvMaker = Callable[[int, int], nn.Module]


class GraphNet(nn.Module):
    """Message-passing layers -> a per-node linear head (node task) or a readout and an MLP head (graph task)."""

    def __init__(
        self,
        make_conv: ConvMaker,
        features: int,
        classes: int,
        task: str,
        hidden: int = HIDDEN,
        layers: int = LAYERS,
        *,
        act: Callable[[], nn.Module] = nn.ReLU,
        dropout: float = 0.0,
        concat: bool = True,
        sum_readout: bool = False,
        degree: bool = False,
    ) -> None:
        super().__init__()
        from torch_geometric.nn import SimpleConv
        from torch_geometric.nn.aggr import MeanAggregation, SumAggregation

        if task not in GRAPH_TASKS:
            raise ValueError(f"A graph model classifies nodes or graphs, not {task!r}.")
        self.task = task
        self.concat = concat
        # A mean over the neighbours (SAGE) or an attention-weighted one (GAT) of equal features is that feature
        # again: on graphs whose nodes all look alike (the generated sets' ones) such a model sees no structure at
        # all. `degree` gives the first layer each node's degree, log(1 + d), beside its features, counted by a
        # message-passing sum so that PyG's edge masks (GNNExplainer, captum) weigh it as they weigh every message.
        self.degree: nn.Module | None = SimpleConv(aggr="sum") if degree else None
        first = features + (1 if degree else 0)
        self.convs = nn.ModuleList(make_conv(first if i == 0 else hidden, hidden) for i in range(layers))
        self.acts = nn.ModuleList(act() for _ in range(layers))
        self.drops = nn.ModuleList(nn.Dropout(dropout) for _ in range(layers))
        self.drop = nn.Dropout(dropout)  # before the heads (the last layer's own dropout feeds no layer)
        width = hidden * layers if concat else hidden
        if task == "node":
            self.head: nn.Module = nn.Linear(width, classes)
        else:
            self.pool: nn.Module = SumAggregation() if sum_readout else MeanAggregation()
            self.head = nn.Sequential(nn.Linear(width, hidden), act(), nn.Dropout(dropout), nn.Linear(hidden, classes))

    def inputs(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        """What the first layer reads: the node features, and each node's degree where the model counts it."""
        if self.degree is None:
            return x
        counted = self.degree(torch.ones(len(x), 1, dtype=x.dtype, device=x.device), edge_index)
        return torch.cat([x, torch.log1p(counted)], dim=1)

    def embed(self, x: torch.Tensor, edge_index: torch.Tensor) -> list[torch.Tensor]:
        """Every layer's node embeddings (n, hidden), in order (after its nonlinearity, before its dropout)."""
        out, h = [], self.inputs(x, edge_index)
        for conv, act, drop in zip(self.convs, self.acts, self.drops, strict=True):
            e = act(conv(h, edge_index))
            out.append(e)
            h = drop(e)
        return out

    def gnn(self, x: torch.Tensor, edge_index: torch.Tensor, batch: torch.Tensor | None = None) -> torch.Tensor:
        """PyG's convention: node logits (n, classes), or graph logits (graphs, classes) for a graph task (`batch`:
        each node's graph; None: one graph)."""
        # float32 even under the engine's bf16 autocast: GCN tells BA-Shapes' house nodes from the base by degree
        # normalisations that differ in the third digit, which bf16's 8-bit mantissa rounds away (through the
        # engine with bf16, gcn reached 84% on ba_shapes; 98.6% in float32). These models are too small to gain.
        with torch.autocast(x.device.type, enabled=False):
            return self.read(self.embed(x.float(), edge_index), batch)

    def read(self, embeddings: list[torch.Tensor], batch: torch.Tensor | None = None) -> torch.Tensor:
        """The heads over `embed`'s layers: every layer's output concatenated (or the last layer's), then a linear
        layer per node, or the readout per graph and the MLP head."""
        h = self.drop(torch.cat(embeddings, dim=1) if self.concat else embeddings[-1])
        if self.task == "node":
            out: torch.Tensor = self.head(h)
            return out
        index = batch if batch is not None else torch.zeros(len(h), dtype=torch.long, device=h.device)
        size = int(index.max()) + 1 if len(index) else 1
        out = self.head(self.pool(h, index, dim_size=size))
        return out

    def forward(self, batch: Any) -> torch.Tensor:
        centre = centre_of(batch)
        if centre is not None:
            return self.gnn(batch.x, batch.edge_index)[centre]
        return self.gnn(batch.x, batch.edge_index, batch.batch)[batch.owner]


class PyGView(nn.Module):
    """A graph model in PyG's calling convention, `model(x, edge_index, batch=None)`: what
    `torch_geometric.explain.Explainer` and PyG's metrics call. It shares the model's parameters."""

    def __init__(self, model: GraphNet) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, batch: torch.Tensor | None = None, **_: Any) -> Any:
        return self.model.gnn(x, edge_index, batch)


def release_masks(model: nn.Module) -> None:
    """Undo what a mask-learning explainer leaves behind. Worked around by hand: PyG 2.8.1's GNNExplainer (and
    PGExplainer) sets each layer's edge mask as a Parameter, and `clear_masks` sets it to None but leaves the name
    registered among the layer's parameters; the next `set_masks` (CaptumExplainer's) then wraps its mask in a new
    Parameter, cut from captum's input, and fails ("differentiated Tensor ... not used"). Call it after such a run."""
    from torch_geometric.nn import MessagePassing

    for module in model.modules():
        if isinstance(module, MessagePassing) and module._parameters.get("_edge_mask", False) is None:
            del module._parameters["_edge_mask"]


def full_batch(
    epochs: int, expected_acc: float | None = None, recommended: bool = False, lr: float = 1e-2, **options: Any
) -> Recipe:
    """A node set's recipe: all its training nodes in one batch (one step an epoch, every step the whole graph's
    message passing), Adam at 0.01 with weight decay 5e-4, the GNNExplainer paper's; `options`: build options."""
    return Recipe(
        epochs=epochs,
        batch_size=4096,
        lr=lr,
        optimizer="adam",
        schedule="constant",
        weight_decay=5e-4,
        expected_acc=expected_acc,
        recommended=recommended,
        model_options=tuple(options.items()),
    )


def fits(info: DatasetInfo) -> str | None:
    return None if info.graph is not None else "reads graphs (ba_shapes, tree_cycles, ba_2motifs, karate, ...)"


def task_of(info: DatasetInfo) -> str:
    assert info.graph is not None  # fits() refused anything else before a build
    return info.graph.task


def graph_builder(
    conv: Callable[[int, int], nn.Module], *, sum_readout: bool = False, degree: bool = False
) -> Callable[..., GraphNet]:
    """The `build` of a model that is a `GraphNet` of `conv` layers; `sum_readout` and `degree` are its defaults
    for those options (GIN sums, SAGE reads the degree)."""
    default_sum, default_degree = sum_readout, degree

    def build(
        info: DatasetInfo,
        hidden: int = HIDDEN,
        layers: int = LAYERS,
        dropout: float = 0.0,
        concat: bool = True,
        sum_readout: bool = default_sum,
        degree: bool = default_degree,
        **_: Any,
    ) -> GraphNet:
        return GraphNet(
            conv,
            info.input_shape[0],
            info.num_classes,
            task_of(info),
            int(hidden),
            int(layers),
            dropout=float(dropout),
            concat=bool(concat),
            sum_readout=bool(sum_readout),
            degree=bool(degree),
        )

    return build


OPTIONS: dict[str, ModelOption] = {
    "hidden": ModelOption("int", 1, 512, help="units per layer"),
    "layers": ModelOption("int", 1, 8, help="message-passing layers"),
    "dropout": DROPOUT,
    "concat": ModelOption("bool", help="the head reads every layer's output concatenated (else the last layer's)"),
    "sum_readout": ModelOption("bool", help="graph task: sum the nodes' embeddings (else their mean)"),
    "degree": ModelOption("bool", help="the first layer reads each node's degree beside its features"),
}


def register_graph_model(
    name: str,
    build: Callable[..., nn.Module],
    description: str,
    recipes: Mapping[str, Recipe],
    extra: Mapping[str, ModelOption] | None = None,
) -> None:
    """Register a graph model with the options every graph model takes (and its own `extra` ones)."""
    register(
        ModelSpec(
            name=name,
            modality="graph",
            build=build,
            description=description,
            fits=fits,
            input_note="graphs: one node's class, or a whole graph's",
            recipes=recipes,
            options={**OPTIONS, **(extra or {})},
            # Graphs are explained through PyG's explainers (CaptumExplainer's gradients), not captum's DeepLift
            # or shap's DeepExplainer, which take one input tensor (the zoo table says so).
            deeplift_ok=False,
        )
    )
