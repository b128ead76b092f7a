"""Graphs on the pages (issue 32) through AppTest: a graph set trained from the Train page (the job, its finished
run and curves), and the Embeddings page's per-layer node embeddings and over-smoothing chart on a tiny trained gcn
(a few epochs on one torch thread)."""

from __future__ import annotations

import functools
from pathlib import Path

import pandas as pd
import pytest
import torch
from app_pages import assert_ok, open_page, texts
from app_pages import make_app as _make_app
from streamlit.dataframe_util import convert_arrow_bytes_to_pandas_df

from xaidash.dashboard.services import job_manager
from xaidash.data.registry import load_split
from xaidash.explainers.inspection.graph_layers import graph_layers
from xaidash.models.runs.store import load_bundle, resolve_run
from xaidash.models.training.config import TrainConfig

TIMEOUT = 180
make_app = functools.partial(_make_app, timeout=TIMEOUT)


def _train(root: Path, dataset: str, epochs: int, **options: int) -> str:
    from xaidash.models.training.engine import train

    torch.set_num_threads(1)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XAIDASH_RUNS", str(root))
        mp.setenv("XAIDASH_OFFLINE", "1")
        cfg = TrainConfig(dataset=dataset, model="gcn", epochs=epochs, device="cpu", seed=0, model_options=options)
        result = train(cfg)
    assert result.ok, result.error
    return Path(result.run_dir).name


@pytest.fixture(scope="module")
def graph_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """gcn on ba_shapes (node task, motifs recorded) and on ba_2motifs (graph task), a few epochs each."""
    root = tmp_path_factory.mktemp("graph_runs")
    return root, {"ba_shapes": _train(root, "ba_shapes", 30), "ba_2motifs": _train(root, "ba_2motifs", 2)}


def _open(graph_runs, monkeypatch, which: str, page: str, **state):
    root, ids = graph_runs
    monkeypatch.setenv("XAIDASH_RUNS", str(root))
    at = make_app(ids[which])
    for k, v in state.items():
        at.session_state[k] = v
    return open_page(at, page)


def _frames(at) -> list[list[pd.DataFrame]]:
    """Every Vega-Lite chart's data sets, as frames (one list per chart)."""
    return [
        [convert_arrow_bytes_to_pandas_df(d.data.data) for d in c.proto.datasets] for c in at.get("vega_lite_chart")
    ]


def _expected(graph_runs, which: str, n: int | None = None):
    root, ids = graph_runs
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XAIDASH_RUNS", str(root))
        bundle = load_bundle(resolve_run(ids[which]))
    test = load_split(bundle.info.name, "test")
    return graph_layers(bundle, test, range(n or len(test))), test


@pytest.mark.slow  # trains karate through the job manager, as the page's button does
def test_a_graph_set_trains_from_the_train_page(tmp_path, monkeypatch):
    monkeypatch.setenv("XAIDASH_RUNS", str(tmp_path))
    torch.set_num_threads(1)
    job_manager.clear()
    at = open_page(make_app(), "views/train.py")
    at.selectbox(key="train_dataset").set_value("karate").run()
    assert_ok(at)
    assert at.selectbox(key="train_model").value in {"gcn", "sage", "gin", "gat"}
    at.selectbox(key="train_model").set_value("gcn").run()
    at.number_input(key="train_epochs").set_value(40).run()
    assert_ok(at)
    next(b for b in at.button if b.label == "Start training").click().run()
    assert_ok(at)
    job_manager().wait(150)
    at.run()
    assert_ok(at)
    run = resolve_run("latest")
    assert run.config()["dataset"] == "karate" and run.summary()["state"] == "completed"
    assert run.info.graph is not None and run.info.graph.task == "node"  # the graph facts survive config.json
    finished = " ".join(texts(at.success))
    assert "Finished" in finished and "40 of 40 epochs" in finished
    assert at.get("vega_lite_chart"), "no training curves"
    job_manager.clear()


def test_embeddings_shows_each_layers_node_embeddings_and_their_spread(graph_runs, monkeypatch):
    at = _open(graph_runs, monkeypatch, "ba_shapes", "views/embeddings.py", gemb_source="test+train")
    assert_ok(at)
    assert not at.error, texts(at.error)
    expected, _ = _expected(graph_runs, "ba_shapes")
    width = int(expected.embeddings[0].shape[1])  # the recipe's units per layer
    assert list(at.selectbox(key="gemb_layer").options) == expected.names
    assert expected.names == [f"layer {k} of 3 ({width} units)" for k in (1, 2, 3)]
    points, chart = _frames(at)[0][-1], _frames(at)[1][0]
    assert len(points) == 700 and set(points["split"]) == {"test", "train"}  # every node of BA-Shapes, once
    assert set(points["true"]) == {"base", "house top", "house middle", "house bottom"}
    # The over-smoothing chart: both measures per layer, over the whole graph, as graph_layers computes them.
    spread = chart[chart["measure"].str.startswith("spread")].sort_values("layer")["value"].tolist()
    energy = chart[chart["measure"].str.startswith("Dirichlet")].sort_values("layer")["value"].tolist()
    assert spread == pytest.approx(expected.spread, rel=1e-6) and energy == pytest.approx(expected.energy, rel=1e-6)
    caption = " ".join(texts(at.main.caption))
    assert f"from {expected.spread[0]:.3g} to {expected.spread[-1]:.3g}" in caption
    assert f"from {expected.energy[0]:.3g} to {expected.energy[-1]:.3g} from layer 1 to layer 3" in caption
    # The third layer, coloured by motif membership: BA-Shapes' 400 house nodes.
    at.selectbox(key="gemb_layer").set_value(2).run()
    at.radio(key="gemb_colour").set_value("motif").run()
    assert_ok(at)
    points = _frames(at)[0][-1]
    assert (points["motif"] == "in the motif").sum() == 400
    assert "PCA of layer 3 of 3" in str(at.get("vega_lite_chart")[0].proto.spec)


def test_embeddings_of_a_graph_task_draw_every_node_of_the_graphs(graph_runs, monkeypatch):
    at = _open(graph_runs, monkeypatch, "ba_2motifs", "views/embeddings.py", gemb_n_test=30)
    assert_ok(at)
    _, test = _expected(graph_runs, "ba_2motifs", 200)
    points = _frames(at)[0][-1]
    sizes = {int(i): int(test.graphs[int(i)].num_nodes) for i in points["index"].unique()}
    assert len(sizes) == 30 and len(points) == sum(sizes.values())  # 30 graphs, one point per node
    assert set(points["true"]) <= {"house", "cycle"} and "motif" in at.radio(key="gemb_colour").options


def test_explains_picker_names_a_node_tasks_samples_by_their_node(graph_runs, monkeypatch):
    at = _open(graph_runs, monkeypatch, "ba_shapes", "views/explain.py")
    assert_ok(at)
    test = load_split("ba_shapes", "test")
    picker = next(m for m in at.multiselect if m.label.startswith("Samples"))
    first = picker.format_func(0)
    assert first.startswith(
        f"#0 node {int(test.nodes[0])}: {('base', 'house top', 'house middle', 'house bottom')[int(test.labels[0])]}→"
    )
    assert picker.value == [0]
    assert not [c for c in texts(at.main.caption) if "Out-of-distribution check not available" in c]
    # A graph task's samples are whole graphs: their index names them.
    at = _open(graph_runs, monkeypatch, "ba_2motifs", "views/explain.py")
    assert_ok(at)
    picker = next(m for m in at.multiselect if m.label.startswith("Samples"))
    assert picker.format_func(3).split(" ")[1].split("→")[0] in {"house", "cycle"}


def test_the_model_page_summarises_a_graph_models_layers(graph_runs, monkeypatch):
    at = _open(graph_runs, monkeypatch, "ba_shapes", "views/model.py")
    assert_ok(at)
    assert not at.error, texts(at.error)
    rows = next(d.value for d in at.dataframe if "output shape" in d.value.columns)
    convs = rows[rows["type"] == "GCNConv"]
    model = _expected_bundle(graph_runs).model
    width = str(model.convs[0].out_channels)
    assert list(convs["layer"]) == ["convs.0", "convs.1", "convs.2"] and set(convs["output shape"]) == {width}
    assert int(rows["parameters"].sum()) == sum(p.numel() for p in model.parameters())


def _expected_bundle(graph_runs):
    root, ids = graph_runs
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XAIDASH_RUNS", str(root))
        return load_bundle(resolve_run(ids["ba_shapes"]))


def test_the_concepts_page_says_in_a_line_that_no_concept_source_reads_graphs(graph_runs, monkeypatch):
    at = _open(graph_runs, monkeypatch, "ba_shapes", "views/concepts.py")
    assert_ok(at)
    assert not at.error and "no concept source reads graphs yet" in " ".join(texts(at.info))


@pytest.mark.parametrize(("epochs", "dots"), [(30, True), (500, False)])
def test_validation_dots_give_way_to_a_line_over_hundreds_of_full_batch_epochs(epochs: int, dots: bool) -> None:
    from xaidash.dashboard.components.curves import CurveOptions, curve_frame, epoch_ends, metric_chart

    history = [
        record
        for e in range(1, epochs + 1)
        for record in (
            {"kind": "step", "epoch": e, "step": e, "train_loss": 1.0 / e, "train_acc": 0.5, "interval_steps": 1},
            {"kind": "epoch", "epoch": e, "step": e, "val_loss": 1.0 / e, "val_acc": 0.5},
        )
    ]
    chart = metric_chart(curve_frame(history), "loss", CurveOptions(), epoch_ends(history), by_run=False)
    assert chart is not None
    marks = [layer.get("mark") for layer in chart.to_dict()["layer"]]
    validation = [m for m in marks if isinstance(m, dict) and m.get("type") == "line" and m.get("strokeWidth") != 1]
    assert any(bool(m.get("point")) for m in validation) is dots
