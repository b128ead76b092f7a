"""Dataset registry: each data set is one module that registers a `DatasetSource`.

A source declares what the data is (`DatasetInfo`) and loads its splits. Image splits
hold float images in [0, 1] (not normalised: normalisation belongs to the model input,
see `data.transforms`); text splits hold raw strings; table splits hold raw rows (each column in its own units,
categories as codes), which the table adapter standardises and one-hot encodes for the model; series splits hold raw
values (N, C, T) in their own units, which the series adapter standardises per channel.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import torch

from xaidash.data.errors import DatasetError
from xaidash.data.formatting import measured_text
from xaidash.data.specs import Registry, Spec

# The id of the data set's input adapter in xaidash.data.modalities (image, text, ...): a new adapter adds no literal here.
Modality = str
SplitName = Literal["train", "test"]


@dataclass(frozen=True)
class TableColumn:
    """One column of a table as a model reads it. Numeric columns carry the training split's range (sliders, grids,
    counterfactual bounds), mean and std (the model standardises with them) and median; a categorical column its
    categories (code i means `categories[i]`) and, in `median`, its most frequent code."""

    name: str
    kind: Literal["numeric", "categorical"] = "numeric"
    categories: tuple[str, ...] = ()
    low: float = 0.0
    high: float = 0.0
    mean: float = 0.0
    std: float = 1.0
    median: float = 0.0
    integer: bool = False  # whole numbers only (counts, years): grids and edits stay on them

    @property
    def categorical(self) -> bool:
        return self.kind == "categorical"

    @property
    def width(self) -> int:
        """Positions it takes in the model's input: one, or one per category (one-hot)."""
        return len(self.categories) if self.categorical else 1

    def value_text(self, value: float) -> str:
        """A raw value as people read it: a category's name, or the number."""
        if self.categorical:
            code = round(value)
            return self.categories[code] if 0 <= code < len(self.categories) else f"code {code}"
        return f"{round(value)}" if self.integer else measured_text(value)


@dataclass(frozen=True)
class RegressionTarget:
    """A number to predict instead of a class: its name and unit, and its training split's mean and std (the model
    learns it standardised and answers in its units), range and quartiles (for reading an error's size)."""

    name: str
    unit: str = ""
    mean: float = 0.0
    std: float = 1.0
    low: float = 0.0
    high: float = 0.0

    def value_text(self, value: float) -> str:
        """A predicted or true value as people read it: '152.3 points'."""
        return measured_text(value) + (f" {self.unit}" if self.unit else "")


@dataclass(frozen=True)
class Forecast:
    """A series to forecast: a model reads `window` past steps and answers the next `horizon` (its outputs, the
    data set's `classes`, are 't+1' ... 't+H', each in `regression`'s units). `season`: the steps in one season
    (12 months), what the seasonal-naive forecast repeats; `tail`: the held-out last steps of the series, whose
    values only the test windows forecast."""

    horizon: int
    window: int
    season: int
    tail: int

    @property
    def steps(self) -> tuple[str, ...]:
        """The outputs' names: ('t+1', ..., 't+H')."""
        return tuple(f"t+{h}" for h in range(1, self.horizon + 1))


GraphTask = Literal["node", "graph"]
GRAPH_TASKS: tuple[GraphTask, ...] = ("node", "graph")  # classify one node of a graph, or a whole graph


@dataclass(frozen=True)
class GraphFacts:
    """What a data set of graphs asks. `task`: "node" (classify one node of a graph: an input is a graph and a node)
    or "graph" (classify a whole graph); `feature_names`: one per node feature, in order; `hops`: how far from a
    node an explanation draws its neighbourhood (the depth of the message passing that reads it)."""

    task: GraphTask
    feature_names: tuple[str, ...]
    hops: int = 3


@dataclass(frozen=True)
class DatasetInfo:
    """What a data set is. `input_shape` is (C, H, W) for images, (C, T) for series (channels, time steps), () for
    text; `mean` / `std` per channel (images, series: the training split's, which the model is fed standardised by)."""

    name: str
    modality: Modality
    classes: tuple[str, ...]
    input_shape: tuple[int, ...] = ()
    mean: tuple[float, ...] = ()
    std: tuple[float, ...] = ()
    description: str = ""
    builtin: bool = False  # generated or shipped with a dependency: always works offline
    has_masks: bool = False  # images: per-pixel ground truth of the object
    has_rationales: bool = False  # text: indices of the words that set the label; series: of the steps that do
    columns: tuple[TableColumn, ...] = ()  # tables: the columns, in the order of a row's values
    truth_columns: tuple[str, ...] = ()  # tables: the columns known to set the label (a generated table)
    channel_names: tuple[str, ...] = ()  # series: each channel's name, in order ('value' for a univariate series)
    step_name: str = "step"  # series: what one time step is ('month', 'frame'), for axes and legends
    source_url: str = ""
    # A number to predict (`classes` is then its one name: the model has one output); None: classes
    regression: RegressionTarget | None = None
    # A series to forecast (`regression` is then the series' values, `classes` one name per step ahead); None: not
    forecast: Forecast | None = None
    # Graphs: node or graph classification, the node features' names (`input_shape` is (features,)); None: not graphs
    graph: GraphFacts | None = None

    @property
    def num_classes(self) -> int:
        return len(self.classes)


@dataclass
class ImageSplit:
    """Images as one float tensor (N, C, H, W) in [0, 1], labels (N,), optional masks (N, H, W) bool.

    Large or lazily read data (an image folder) sets `dataset` instead of `images`: a torch
    Dataset yielding (image, label) that the training engine reads through a DataLoader.
    """

    labels: torch.Tensor
    images: torch.Tensor | None = None
    masks: torch.Tensor | None = None
    dataset: torch.utils.data.Dataset | None = None
    paths: list[str] | None = None  # for user data: where each sample came from

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    @property
    def in_memory(self) -> bool:
        return self.images is not None

    def image(self, index: int) -> torch.Tensor:
        """One image (C, H, W) in [0, 1]."""
        if self.images is not None:
            return self.images[index]
        assert self.dataset is not None
        return self.dataset[index][0]

    def batch(self, indices: Sequence[int]) -> torch.Tensor:
        if self.images is not None:
            return self.images[torch.as_tensor(list(indices), dtype=torch.long)]
        return torch.stack([self.image(i) for i in indices])


@dataclass
class TextSplit:
    """Raw texts, labels (N,), and, where known, the word indices that set each label."""

    texts: list[str]
    labels: torch.Tensor
    rationales: list[list[int]] | None = None

    def __len__(self) -> int:
        return len(self.texts)


@dataclass
class TableSplit:
    """Raw rows (N, F) float32, each column in its own units and a categorical column as its category's code; labels
    (N,); the rows' ids where the file had an id column."""

    rows: torch.Tensor
    labels: torch.Tensor
    ids: list[str] | None = None

    def __len__(self) -> int:
        return int(self.rows.shape[0])


@dataclass
class SeriesSplit:
    """Raw series (N, C, T) float32, every channel in its own units; labels (N,). `windows`: where known, the time
    steps (indices) that set each label (a generated pattern's steps), the ground truth of the localisation metrics;
    `lengths`: each series' length before it was padded to T (a data set of varying lengths), else None; `ids`:
    where each series came from (a file's id column)."""

    series: torch.Tensor
    labels: torch.Tensor
    windows: list[list[int]] | None = None
    lengths: torch.Tensor | None = None
    ids: list[str] | None = None

    def __len__(self) -> int:
        return int(self.series.shape[0])


@dataclass
class GraphSplit:
    """Graphs (PyTorch Geometric `Data`: raw node features `x` (n, F) float32, `edge_index` (2, E) long, and where
    known the ground truth `node_truth` (n,) bool and `edge_truth` (E,) bool: the motif that sets a label) and one
    sample per label: sample i is graph `graph_of[i]`, and its node `nodes[i]` for a node task (`nodes` None: each
    sample is a whole graph). A transductive set (BA-Shapes, the karate club) has one graph; its train and test
    splits are seeded subsets of its nodes."""

    graphs: list[Any]
    labels: torch.Tensor
    graph_of: torch.Tensor
    nodes: torch.Tensor | None = None

    def __len__(self) -> int:
        return int(self.labels.shape[0])


Split = ImageSplit | TextSplit | TableSplit | SeriesSplit | GraphSplit


class Loader(Protocol):
    def __call__(self, split: SplitName, root: Path, download: bool) -> Split: ...


@dataclass
class DatasetSource(Spec):
    """A registered data set: its info, a loader, and how to tell whether it is available."""

    info: DatasetInfo
    loader: Loader
    is_available: Callable[[Path], bool] = field(default=lambda root: True)

    @property
    def id(self) -> str:
        return self.info.name

    def load(self, split: SplitName = "train", root: Path | None = None, download: bool | None = None) -> Split:
        """One split from `root` (default: the data root). `download=None` downloads what is missing
        unless the machine is offline (XAIDASH_OFFLINE / HF_HUB_OFFLINE); True or False force it."""
        from xaidash.data.paths import data_root, offline

        if split not in ("train", "test"):
            raise DatasetError(f"Unknown split {split!r}: use 'train' or 'test'.")
        if download is None:
            download = not offline()
        return self.loader(split, Path(root) if root else data_root(), download)


@dataclass(frozen=True)
class DatasetFactory(Spec):
    """A parametrised data set such as 'imagefolder:<path>': `id` is the prefix, `build(argument)` its source,
    `argument` how the part after the prefix is written, `own` whether it reads the user's own files (a built-in
    set with options, `forecast:airline?horizon=6`, is not)."""

    id: str
    build: Callable[[str], DatasetSource]
    argument: str = "<path>"
    own: bool = True

    @property
    def form(self) -> str:
        return f"{self.id}:{self.argument}"


def _unknown(name: Hashable, known: list[str]) -> str:
    named = ", ".join(known) + ", " + ", ".join(f.form for f in sorted(FACTORIES, key=lambda f: f.id))
    return f"Unknown dataset {name!r}. Known: {named}."


DATASETS: Registry[DatasetSource] = Registry("dataset", error=DatasetError, unknown=_unknown)
# Parametrised sources, by prefix ("imagefolder" for "imagefolder:<path>").
FACTORIES: Registry[DatasetFactory] = Registry("dataset factory", error=DatasetError)


def register(source: DatasetSource) -> DatasetSource:
    return DATASETS.register(source)


def register_factory(
    prefix: str, factory: Callable[[str], DatasetSource], argument: str = "<path>", own: bool = True
) -> None:
    FACTORIES.register(DatasetFactory(prefix, factory, argument, own))


def own_data_forms() -> list[str]:
    """How the user's own data is named ('csv:<path>', 'imagefolder:<path>')."""
    return [f.form for f in sorted(FACTORIES, key=lambda f: f.id) if f.own]


def list_factories() -> list[str]:
    """Prefixes of parametrised data sets, e.g. 'imagefolder' for 'imagefolder:<path>'."""
    return sorted(f.id for f in FACTORIES)


def list_datasets() -> list[DatasetInfo]:
    """The named (not parametrised) data sets, in registration order."""
    return [s.info for s in DATASETS]


def get_source(name: str) -> DatasetSource:
    """The source for a name such as 'mnist' or 'imagefolder:/data/pets'."""
    prefix, sep, arg = name.partition(":")
    factory = FACTORIES.find(prefix) if sep else None
    return factory.build(arg) if factory is not None else DATASETS.get(name)


def get_info(name: str) -> DatasetInfo:
    return get_source(name).info


def load_split(name: str, split: SplitName = "train", root: Path | None = None, download: bool | None = None) -> Split:
    """Load one split of a data set by name (`download=None`: download what is missing unless offline)."""
    return get_source(name).load(split, root, download)
