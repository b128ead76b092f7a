"""The contract every data set keeps, checked on each registered one and on the user-data factories.

Both splits load and are non-empty; image splits hold float32 (N, *input_shape) in [0, 1] with int64
labels and, with `has_masks`, bool masks (N, H, W); text splits hold non-empty strings and, with
`has_rationales`, valid word indices; class names are unique non-empty strings, each class occurs
in the training split, and `get_info(name)` is the source's info. Real data sets are read offline
from the shared-data mirror; values are checked on an evenly spread slice so 60,000 images stay cheap.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from PIL import Image

import xaidash.data  # noqa: F401  (registers every data set)
from xaidash.data.errors import DatasetUnavailable
from xaidash.data.modalities import modality_of
from xaidash.data.paths import data_root
from xaidash.data.registry import (
    DatasetInfo,
    GraphSplit,
    ImageSplit,
    SeriesSplit,
    Split,
    TableSplit,
    TextSplit,
    get_info,
    get_source,
    list_datasets,
)
from xaidash.data.tokenizer import split_words

CHECKED = 256  # samples per split whose values are read (dtypes, shapes and labels are checked in full)
FACTORIES = ("imagefolder", "csv")
TABLE_CASE = "csv:<a small table in tmp_path>?target=y"  # the csv: factory's other kind: a table of columns
SERIES_CASE = "csv:<small series in tmp_path>?modality=series"  # and its third: series, one per row (some shorter)
GRAPHS_CASE = "graphs:<a folder of small graphs in tmp_path>"
CASES = [info.name for info in list_datasets()] + [f"{prefix}:<small data in tmp_path>" for prefix in FACTORIES]
CASES += [TABLE_CASE, SERIES_CASE, GRAPHS_CASE]

_loaded: dict[tuple[str, Path], dict[str, Split]] = {}


def _write_image_folder(folder: Path) -> Path:
    colours = {"red": (220, 30, 30), "green": (30, 200, 40), "blue": (20, 40, 210)}
    for name, colour in colours.items():
        (folder / name).mkdir(parents=True)
        for i in range(5):
            Image.new("RGB", (12 + i, 10), colour).save(folder / name / f"{i}.png")
    return folder


def _write_csv(path: Path) -> Path:
    rows = [("a lovely warm film", "pos"), ("dull and far too long", "neg"), ("spam spam spam", "spam")] * 5
    path.write_text("text,label\n" + "".join(f"{text},{label}\n" for text, label in rows), encoding="utf-8")
    return path


def _write_table(path: Path) -> Path:
    """Numeric, categorical (one value missing) and id columns; classes a and b."""
    rows = [f"r{i},{i * 0.5},{['red', 'green', ''][i % 3]},{'ab'[i % 2]}" for i in range(30)]
    path.write_text("id,x,colour,y\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


def _write_series(path: Path) -> Path:
    """Wide: an id, classes up and down, 6 steps; every fourth series 2 steps shorter (its last cells empty)."""
    rows = [f"s{i},{'ud'[i % 2]}," + ",".join(str(i + k) for k in range(6 - 2 * (i % 4 == 0))) for i in range(20)]
    path.write_text("id,y,t0,t1,t2,t3,t4,t5\n" + "\n".join(r + ",," * (r.count(",") < 7) for r in rows) + "\n")
    return path


def _write_graphs(folder: Path) -> Path:
    """Ten JSON graphs of 4 nodes, a ring (class ring) or a star (class star), 2 features, a ring's nodes the truth."""
    folder.mkdir()
    for i in range(10):
        ring = i % 2 == 1
        edges = [[0, 1], [1, 2], [2, 3], [3, 0]] if ring else [[0, 1], [0, 2], [0, 3]]
        nodes = [{"id": n, "features": [n, i], "truth": ring} for n in range(4)]
        doc = {"label": "ring" if ring else "star", "nodes": nodes, "edges": edges}
        (folder / f"g{i}.json").write_text(json.dumps(doc), encoding="utf-8")
    return folder


@pytest.fixture(params=CASES)
def name(request: pytest.FixtureRequest, offline_data: Path, tmp_path: Path) -> str:
    """A registered data set's name (read offline from the shared-data mirror), or a factory's on small data."""
    case: str = request.param
    if case == TABLE_CASE:
        return f"csv:{_write_table(tmp_path / 'table.csv')}?target=y&id=id"
    if case == GRAPHS_CASE:
        return f"graphs:{_write_graphs(tmp_path / 'graphs')}"
    if case == SERIES_CASE:
        return f"csv:{_write_series(tmp_path / 'series.csv')}?modality=series&label=y&id=id"
    if case.startswith("imagefolder:"):
        return f"imagefolder:{_write_image_folder(tmp_path / 'colours')}?size=16"
    if case.startswith("csv:"):
        return f"csv:{_write_csv(tmp_path / 'reviews.csv')}"
    source = get_source(case)
    if not source.info.builtin and not source.is_available(offline_data):
        # Only a data set the shared data lacks gets here (cifar10), and its loader must then say what is missing.
        # A small fake copy cannot stand in: torchvision checks the MD5 sum of every CIFAR-10 batch file.
        with pytest.raises(DatasetUnavailable) as missing:
            source.load("train", offline_data)
        pytest.skip(
            f"{case}: no offline copy in the shared data, and a fake one fails torchvision's MD5 check ({missing.value})"
        )
    return case


def splits_of(name: str) -> dict[str, Split]:
    """Both splits, loaded once per data set and data root (the real sets take seconds to read)."""
    key = (name, data_root())
    if key not in _loaded:
        source = get_source(name)
        _loaded[key] = {split: source.load(split) for split in ("train", "test")}
    return _loaded[key]


def spread(n: int) -> torch.Tensor:
    """Up to CHECKED indices spread evenly over 0..n-1 (first and last included)."""
    return torch.linspace(0, n - 1, min(n, CHECKED)).round().long().unique()


def test_info_is_the_sources_and_its_classes_are_named_once(name: str) -> None:
    info = get_info(name)
    assert info == get_source(name).info and info.name == name
    # a number to predict has one "class", its name (the model's one output); classes are at least two
    fewest = 1 if info.regression is not None else 2
    assert isinstance(info.classes, tuple) and info.num_classes == len(info.classes) >= fewest
    if info.forecast is not None:  # a number per step ahead: one output each, 't+1' ... 't+H'
        assert info.regression is not None and info.regression.std > 0
        assert info.classes == info.forecast.steps and info.num_classes == info.forecast.horizon
    elif info.regression is not None:
        assert info.num_classes == 1 and info.regression.name == info.classes[0] and info.regression.std > 0
    assert all(isinstance(c, str) and c.strip() for c in info.classes), info.classes
    assert len(set(info.classes)) == info.num_classes, info.classes


def test_both_splits_load_and_hold_every_class_in_training(name: str) -> None:
    info = get_info(name)
    splits = splits_of(name)
    for split_name, split in splits.items():
        modality_of(info.modality).check_split(split, name)  # the split its modality's adapter reads
        assert len(split) > 0, split_name
        labels = split.labels
        if info.regression is not None:  # the values to predict, in their units, finite (a forecast's: one per step)
            steps = (info.forecast.horizon,) if info.forecast is not None else ()
            assert labels.dtype == torch.float32 and labels.shape == (len(split), *steps) and labels.isfinite().all()
            continue
        assert labels.dtype == torch.int64 and labels.shape == (len(split),), (split_name, labels.dtype, labels.shape)
        assert int(labels.min()) >= 0 and int(labels.max()) < info.num_classes, split_name
    if info.forecast is not None:  # split by time: the held-out tail need not span the history's range
        return
    if info.regression is not None:  # both sides span the target's range (stratified on its quintiles)
        train, test = splits["train"].labels, splits["test"].labels
        assert float(train.min()) == info.regression.low and float(train.max()) == info.regression.high
        assert float(test.std()) > 0.5 * info.regression.std
        return
    counts = torch.bincount(splits["train"].labels, minlength=info.num_classes)
    assert (counts > 0).all(), dict(zip(info.classes, counts.tolist(), strict=True))


def _check_images(info: DatasetInfo, split: ImageSplit) -> None:
    n = len(split)
    if split.images is not None:  # in memory: dtype and shape of the whole tensor cost nothing to read
        assert split.images.dtype == torch.float32 and split.images.shape == (n, *info.input_shape)
    picked = split.batch(spread(n).tolist())
    assert picked.dtype == torch.float32 and picked.shape[1:] == info.input_shape, (picked.dtype, picked.shape)
    assert float(picked.min()) >= 0 and float(picked.max()) <= 1 and float(picked.max()) > 0
    if info.has_masks:
        assert split.masks is not None
        assert split.masks.dtype == torch.bool and split.masks.shape == (n, *info.input_shape[1:])
        assert split.masks[spread(n)].flatten(1).any(1).all(), "an image's object mask is empty"
    else:
        assert split.masks is None


def _check_texts(info: DatasetInfo, split: TextSplit) -> None:
    assert all(isinstance(t, str) and t.strip() for t in split.texts), "a text is empty or not a string"
    if info.has_rationales:
        assert split.rationales is not None and len(split.rationales) == len(split)
        for i in spread(len(split)).tolist():
            words, rationale = split_words(split.texts[i]), split.rationales[i]
            assert rationale and len(set(rationale)) == len(rationale), (i, rationale)
            assert all(0 <= w < len(words) for w in rationale), (i, rationale, words)
    else:
        assert split.rationales is None


def _check_rows(info: DatasetInfo, split: TableSplit) -> None:
    """Raw rows: float32 (N, columns), finite, a categorical column's codes among its categories, a numeric column's
    training facts in order (its median within its range, a positive spread)."""
    assert split.rows.dtype == torch.float32 and split.rows.shape == (len(split), len(info.columns))
    assert info.input_shape == (len(info.columns),) and torch.isfinite(split.rows).all()
    for i, column in enumerate(info.columns):
        values = split.rows[:, i]
        if column.categorical:
            assert column.categories and ((values >= 0) & (values < len(column.categories))).all(), column.name
            assert torch.equal(values, values.round()), column.name
        else:
            assert column.std > 0 and column.low <= column.median <= column.high, column
    assert split.ids is None or len(split.ids) == len(split)


def _check_series(info: DatasetInfo, split: SeriesSplit) -> None:
    """Raw series: float32 (N, C, T) as declared, finite; one name and one training mean and (positive) std per
    channel; real lengths within 2..T where a set pads; with `has_rationales`, windows of distinct steps in range."""
    n = len(split)
    assert split.series.dtype == torch.float32 and split.series.shape == (n, *info.input_shape)
    assert torch.isfinite(split.series).all()
    channels, steps = info.input_shape
    assert len(info.channel_names) == len(info.mean) == len(info.std) == channels and min(info.std) > 0
    if split.lengths is not None:
        assert split.lengths.shape == (n,) and int(split.lengths.min()) >= 2 and int(split.lengths.max()) <= steps
    if info.has_rationales:
        assert split.windows is not None and len(split.windows) == n
        for i in spread(n).tolist():
            window = split.windows[i]
            assert window and len(set(window)) == len(window) and all(0 <= t < steps for t in window), (i, window)
    else:
        assert split.windows is None
    assert split.ids is None or len(split.ids) == n


def _check_graphs(info: DatasetInfo, split: GraphSplit) -> None:
    """Graphs: float32 finite features (n, F) as declared, undirected long edges between existing nodes, the truth
    masks (where recorded) bool and of the right length; each sample's graph (and node, a node task) in range."""
    assert info.graph is not None and info.input_shape == (len(info.graph.feature_names),)
    n = len(split)
    assert split.graph_of.dtype == torch.int64 and split.graph_of.shape == (n,)
    assert int(split.graph_of.min()) >= 0 and int(split.graph_of.max()) < len(split.graphs)
    assert (split.nodes is None) == (info.graph.task == "graph")
    for graph in split.graphs[:CHECKED]:
        assert graph.x.dtype == torch.float32 and graph.x.shape == (graph.num_nodes, *info.input_shape)
        assert torch.isfinite(graph.x).all() and graph.edge_index.dtype == torch.int64
        assert graph.edge_index.numel() == 0 or int(graph.edge_index.max()) < graph.num_nodes
        assert graph.is_undirected() and not graph.has_self_loops()
        truth = getattr(graph, "node_truth", None)
        if truth is not None:
            assert truth.dtype == torch.bool and truth.shape == (graph.num_nodes,)
        edge_truth = getattr(graph, "edge_truth", None)
        if edge_truth is not None:
            assert edge_truth.dtype == torch.bool and edge_truth.shape == (graph.edge_index.shape[1],)
    if split.nodes is not None:
        sizes = torch.tensor([int(g.num_nodes) for g in split.graphs])
        assert split.nodes.dtype == torch.int64 and bool((split.nodes < sizes[split.graph_of]).all())
    if info.has_rationales:
        assert any(getattr(g, "node_truth", None) is not None for g in split.graphs)


def test_inputs_have_the_declared_type_shape_and_range(name: str) -> None:
    info = get_info(name)
    for split in splits_of(name).values():
        if isinstance(split, ImageSplit):
            _check_images(info, split)
        elif isinstance(split, TableSplit):
            _check_rows(info, split)
        elif isinstance(split, SeriesSplit):
            _check_series(info, split)
        elif isinstance(split, GraphSplit):
            _check_graphs(info, split)
        else:
            _check_texts(info, split)
