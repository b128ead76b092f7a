"""The series adapter's explaining half on a stand-in 1-D convolution model: series typed or read from a CSV file
(resampled to the model's length against numpy's interpolation, each refusal one line), maps from (N, C, T) and
(N, 1, T) outputs, the drawn PNG with its colour bar, the figure JSON round trip, the deletion/insertion curves against
a hand computation, the pointing game and energy in the true window, the hover chart and the attention map."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torch import nn

from xaidash.data.errors import ExplainError
from xaidash.data.registry import DatasetInfo, SeriesSplit
from xaidash.explainers.explanation import Explanation
from xaidash.explainers.figures.map_figure import MapFigure, map_figure
from xaidash.explainers.figures.scales import colorize
from xaidash.explainers.inputs import resolve_input
from xaidash.explainers.metrics.complexity import complexity, sparseness
from xaidash.explainers.metrics.ground_truth import rationale_energy, rationale_pointing
from xaidash.explainers.metrics.registry import REGISTRY, metrics_for
from xaidash.explainers.modalities import adapter_of, series_read
from xaidash.explainers.modalities.series import parse_labels
from xaidash.explainers.registry import MethodOutput, get_method
from xaidash.explainers.scoring import metric_meaning
from xaidash.models.bundle import ModelBundle
from xaidash.models.registry import ModelSpec

ADAPTER = adapter_of("series")
STEPS = 16


def stand_in(channels: int) -> ModelBundle:
    """A seeded tiny Conv1d classifier (3 classes) over `channels` x STEPS series, with per-channel mean/std."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv1d(channels, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(4, 3)
    ).eval()
    names = ("value",) if channels == 1 else tuple("xyz"[:channels])
    info = DatasetInfo(
        name="stand_in",
        modality="series",
        classes=("a", "b", "c"),
        input_shape=(channels, STEPS),
        mean=tuple(float(c) for c in range(channels)),
        std=tuple(2.0 for _ in range(channels)),
        channel_names=names,
        step_name="frame",
        has_rationales=True,
    )
    spec = ModelSpec(name="stand_in_cnn", modality="series", build=lambda info: model)
    return ModelBundle(model, spec, info, torch.device("cpu"), has_dataset=False)


@pytest.fixture(scope="module")
def uni() -> ModelBundle:
    return stand_in(1)


@pytest.fixture(scope="module")
def multi() -> ModelBundle:
    return stand_in(3)


def one_line(err: pytest.ExceptionInfo[ExplainError]) -> str:
    text = str(err.value)
    assert "\n" not in text and "Traceback" not in text
    return text


def test_a_typed_series_of_another_length_is_resampled_linearly(uni: ModelBundle) -> None:
    given = [0.0, 4.0, 1.0, -2.0, 3.0]
    series, description = ADAPTER.read_input(", ".join(str(v) for v in given), uni)
    expected = np.interp(np.linspace(0, len(given) - 1, STEPS), np.arange(len(given)), given)
    assert series.shape == (1, STEPS)
    np.testing.assert_allclose(series[0].numpy(), expected, atol=1e-5)
    assert description == f"typed series: 5 frames, resampled from 5 to {STEPS} frames"
    exact, said = ADAPTER.read_input(", ".join(str(v) for v in range(STEPS)), uni)
    assert exact[0].tolist() == list(range(STEPS)) and "resampled" not in said


def test_a_multivariate_series_is_typed_channel_by_channel(multi: ModelBundle) -> None:
    typed = "; ".join(", ".join(str(c * 100 + t) for t in range(STEPS)) for c in range(3))
    series, _ = ADAPTER.read_input(typed, multi)
    assert series.shape == (3, STEPS) and series[2, 5] == 205


@pytest.mark.parametrize(
    ("typed", "words"),
    [
        ("1, 2, x, 4", ["value 3", "'x' is not a number"]),
        ("1, 2, nan, 4", ["value 3", "'nan' is not a finite number"]),
        ("1, inf", ["'inf' is not a finite number"]),
        ("1, 2; 3, 4", ["has 1 channel", "has 2"]),
        ("   ", ["Give a series"]),
        (",,", ["is empty"]),
        ("5", ["has one value", "at least 2 frames"]),
    ],
)
def test_a_typed_series_that_cannot_be_read_is_refused_in_one_line(
    uni: ModelBundle, typed: str, words: list[str]
) -> None:
    with pytest.raises(ExplainError) as err:
        ADAPTER.read_input(typed, uni)
    assert all(w in one_line(err) for w in words), one_line(err)


def test_multivariate_refusals_name_the_channels(multi: ModelBundle) -> None:
    with pytest.raises(ExplainError) as err:
        ADAPTER.read_input("1, 2, 3; 4, 5, 6", multi)
    assert "3 channels (x, y, z)" in one_line(err)
    with pytest.raises(ExplainError) as err:
        ADAPTER.read_input("1, 2, 3; 4, 5; 6, 7, 8", multi)
    assert "differ in length (2, 3)" in one_line(err)


def test_a_csv_file_holds_one_series_per_row(uni: ModelBundle, tmp_path: Path) -> None:
    path = tmp_path / "series.csv"
    path.write_text("t0,t1,t2,t3\n" + "\n".join(",".join(str(r * 10 + t) for t in range(4)) for r in range(3)) + "\n")
    every = ADAPTER.read_inputs(str(path), uni)
    assert [d for _, d in every] == [
        f"row {k} of series.csv: 4 frames, resampled from 4 to 16 frames" for k in (1, 2, 3)
    ]
    second, _ = ADAPTER.read_input(f"{path}:2", uni)
    np.testing.assert_allclose(second[0].numpy(), np.linspace(10, 13, STEPS), atol=1e-5)
    with pytest.raises(ExplainError) as err:
        ADAPTER.read_input(str(path), uni)
    assert "holds 3 series: name one as series.csv:ROW (1 to 3)" in one_line(err)
    with pytest.raises(ExplainError) as err:
        ADAPTER.read_input(f"{path}:7", uni)
    assert "row 7 is not one of them" in one_line(err)
    path.write_text("1,2,3\n4,oops,6\n")
    with pytest.raises(ExplainError) as err:
        ADAPTER.read_inputs(str(path), uni)
    assert "series.csv, row 2, value 2: 'oops' is not a number" in one_line(err)
    with pytest.raises(ExplainError) as err:
        ADAPTER.read_input(str(tmp_path / "missing.csv"), uni)
    assert "does not exist" in one_line(err)
    path.write_text("a,b,c\n")
    with pytest.raises(ExplainError) as err:
        ADAPTER.read_input(str(path), uni)
    assert "holds no series" in one_line(err)


def test_checked_refuses_series_the_model_cannot_read(uni: ModelBundle) -> None:
    bad = torch.zeros(2, 1, STEPS)
    bad[1, 0, 3] = float("nan")
    with pytest.raises(ExplainError) as err:
        ADAPTER.checked(uni, bad)
    assert "series 2, channel 1, frame 3" in one_line(err)
    with pytest.raises(ExplainError) as err:
        ADAPTER.checked(uni, torch.zeros(1, 2, STEPS))
    assert "1 channel(s) of 16 steps" in one_line(err)
    assert ADAPTER.sample_problem(torch.zeros(1, STEPS), uni, "series 4") is None


def test_maps_sum_the_channels_and_keep_them(multi: ModelBundle) -> None:
    raw = torch.randn(2, 3, STEPS)
    attr = torch.randn(2, 3, STEPS)
    maps = ADAPTER.to_maps(multi, raw, MethodOutput(attributions=attr))
    assert isinstance(maps.attributions, np.ndarray) and maps.attributions.dtype == np.float32
    np.testing.assert_allclose(maps.attributions, attr.sum(1).numpy(), atol=1e-6)
    assert maps.channels is not None and maps.channels.shape == (2, 3, STEPS)
    assert maps.labels is not None and maps.labels[0][5].startswith("frame 5: x=")
    spanning = ADAPTER.to_maps(multi, raw, MethodOutput(attributions=attr[:, :1]))
    assert spanning.channels is None and spanning.attributions.shape == (2, STEPS)
    with pytest.raises(ExplainError) as err:
        ADAPTER.to_maps(multi, raw, MethodOutput(attributions=torch.zeros(2, 2, STEPS)))
    assert "(3, 16) or (1, 16)" in one_line(err)


def _png(data: bytes | None) -> Image.Image:
    assert data is not None
    return Image.open(io.BytesIO(data)).convert("RGB")


@pytest.mark.parametrize("display", ["line", "heatmap"])
def test_the_drawing_has_the_band_and_its_colour_bar(multi: ModelBundle, display: str) -> None:
    raw = torch.randn(1, 3, STEPS)
    channels = np.zeros((3, STEPS), np.float32)
    channels[1, 4] = 1.0  # one strong positive step in channel y
    labels = ADAPTER.to_maps(multi, raw, MethodOutput(attributions=torch.from_numpy(channels[None]))).labels
    assert labels is not None
    values = channels if display == "heatmap" else channels.sum(0)
    drawn = ADAPTER.draw(
        values,
        signed=True,
        scale=1.0,
        clipped=False,
        units="logit per standardised value",
        display=display,
        background=ADAPTER.background_image(raw[0]),
        labels=labels[0],
        upscale=224,
    )
    plot, figure = _png(drawn.map_png), _png(drawn.figure_png)
    assert plot.width == 720 and figure.height > plot.height + 30  # the colour bar and its units below
    pixels = np.asarray(plot).reshape(-1, 3).astype(int)
    red = colorize(np.array([1.0]), True, 1.0)[0] * 255
    assert (np.abs(pixels - red).sum(1) < 12).sum() > 50  # the strong step's colour fills its cell of the band
    bar = np.asarray(figure)[plot.height :].reshape(-1, 3).astype(int)
    assert (np.abs(bar - red).sum(1) < 12).any()


def test_the_figure_json_carries_the_map_and_the_series(multi: ModelBundle) -> None:
    raw = torch.randn(1, 3, STEPS)
    values = np.linspace(-1, 1, STEPS).astype(np.float32)
    labels = ADAPTER.to_maps(multi, raw, MethodOutput(attributions=torch.from_numpy(values)[None, None])).labels
    assert labels is not None
    d = ADAPTER.figure_json(values, labels[0])
    back = ADAPTER.values_from_json(d)
    assert back is not None
    np.testing.assert_allclose(back, values, atol=1e-7)
    np.testing.assert_allclose(np.asarray(d["series"]), raw[0].numpy(), rtol=1e-5, atol=1e-6)
    assert d["channels"] == ["x", "y", "z"] and d["step_name"] == "frame"
    assert ADAPTER.labels_from_json(d) == tuple(labels[0])
    parsed = parse_labels(ADAPTER.labels_from_json(d))
    assert parsed is not None and parsed[0].shape == (3, STEPS)


def _hand_curve(bundle: ModelBundle, raw: torch.Tensor, scores: np.ndarray, target: int, mode: str) -> list[float]:
    """One step at a time, by hand: the most relevant steps set to the channel's mean (0 once prepared)."""
    x = bundle.prepare(raw[None])[0]
    order = np.argsort(-np.abs(scores), kind="stable")
    out = []
    for k in range(STEPS + 1):
        hidden = np.zeros(STEPS, bool)
        hidden[order[:k]] = True
        mask = torch.from_numpy(hidden)[None]
        z = (
            torch.where(mask, torch.zeros_like(x), x)
            if mode == "deletion"
            else torch.where(mask, x, torch.zeros_like(x))
        )
        with torch.no_grad():
            out.append(float(torch.softmax(bundle.model(z[None]), 1)[0, target]))
    return out


@pytest.mark.parametrize("mode", ["deletion", "insertion"])
def test_the_perturbation_curve_equals_a_hand_computation(multi: ModelBundle, mode: str) -> None:
    torch.manual_seed(3)
    raw = torch.randn(2, 3, STEPS) * 2 + torch.tensor([0.0, 1.0, 2.0]).view(1, 3, 1)
    maps = np.random.default_rng(0).normal(size=(2, STEPS)).astype(np.float32)
    e = Explanation("saliency", {}, np.array([0, 2]), maps, 0.0, "cpu", "series")
    got = ADAPTER.perturbation_curve(multi, raw, e, mode=mode, steps=STEPS, batch_size=7)  # batches split points
    for i, target in enumerate((0, 2)):
        np.testing.assert_allclose(got.curves[i], _hand_curve(multi, raw[i], maps[i], target, mode), atol=1e-6)
    np.testing.assert_allclose(got.aucs, np.trapezoid(got.curves, got.fractions, axis=1), atol=1e-6)
    assert got.substrate == "mean"


def test_pointing_game_and_energy_on_the_true_window() -> None:
    window = list(range(6, 10))
    inside, outside = np.zeros(STEPS, np.float32), np.zeros(STEPS, np.float32)
    inside[7], inside[1] = 2.0, 0.5
    outside[12], outside[8] = 2.0, 0.5
    e = Explanation("saliency", {}, np.array([0, 0]), np.stack([inside, outside]), 0.0, "cpu", "series")
    assert rationale_pointing(e, [window, window]).tolist() == [1.0, 0.0]
    np.testing.assert_allclose(rationale_energy(e, [window, window]), [2.0 / 2.5, 0.5 / 2.5])
    assert sparseness(e).shape == (2,) and complexity(e).shape == (2,)


def test_the_listed_metrics_are_registered_and_worded_for_steps() -> None:
    ids = set(ADAPTER.metrics)
    assert ids <= {s.id for s in REGISTRY}
    assert {"deletion_auc", "insertion_auc", "rationale_pointing", "rationale_energy"} <= ids
    assert {m.id for m in metrics_for("compare", "series")} <= ids
    for k in ids:
        meaning = metric_meaning(k, "series")
        assert "{" not in meaning and "word" not in meaning and "pixel" not in meaning
    assert "steps" in metric_meaning("deletion_auc", "series")


def test_the_hover_chart_shows_step_value_and_attribution(multi: ModelBundle) -> None:
    raw = torch.randn(3, STEPS)
    values = np.arange(STEPS, dtype=np.float32) - 4
    chart = ADAPTER.chart(
        values, raw, signed=True, scale=8.0, units="logit", channels=("x", "y", "z"), step_name="frame"
    )
    assert chart is not None
    spec = chart.to_dict()
    strip = spec["vconcat"][1]["encoding"]
    assert [t["field"] for t in strip["tooltip"]] == ["step", "x", "y", "z", "attribution"]
    assert strip["tooltip"][0]["title"] == "frame" and strip["color"]["title"] == "logit"
    scale = strip["color"]["scale"]
    assert scale["domain"][0] == -8.0 and scale["domain"][-1] == 8.0 and scale["clamp"]
    assert scale["range"][0] == "#" + "".join(f"{round(c * 255):02x}" for c in colorize(np.array([-8.0]), True, 8.0)[0])
    rows = spec["datasets"][spec["vconcat"][1]["data"]["name"]]
    assert [r["attribution"] for r in rows] == values.tolist()
    assert [r["z"] for r in rows] == pytest.approx(raw[2].tolist())
    assert [r["start"] for r in rows][:2] == [-0.5, 0.5]  # a step's cell centred on the lines' point
    assert adapter_of("image").chart(np.zeros((2, 2)), None, signed=True, scale=1.0, units="") is None


def test_attention_is_averaged_over_the_query_rows(uni: ModelBundle) -> None:
    matrix = torch.softmax(torch.randn(2, STEPS, STEPS), -1)
    x = torch.zeros(2, 1, STEPS)
    np.testing.assert_allclose(ADAPTER.attention_map(uni, None, x, matrix).numpy(), matrix.mean(1).numpy(), atol=1e-6)
    layout = ADAPTER.token_layout(uni, None, STEPS)
    assert layout.labels[3] == "frame 3" and layout.grid is None and layout.query is None
    with pytest.raises(ExplainError) as err:
        ADAPTER.attention_map(uni, None, x, torch.zeros(2, STEPS + 1, STEPS + 1))
    assert "no class token" in one_line(err)


def test_a_typed_series_is_what_the_cli_input_reads(uni: ModelBundle) -> None:
    raw, label, description = resolve_input("1, 2, 3", uni)
    assert label is None and description.startswith("typed series: 3 frames")
    assert raw.tolist() == ADAPTER.read_input("1, 2, 3", uni)[0].tolist()


def test_the_background_is_a_seeded_pick_of_prepared_training_series(
    multi: ModelBundle, monkeypatch: pytest.MonkeyPatch
) -> None:
    series = torch.randn(10, 3, STEPS) * 2 + torch.tensor([0.0, 1.0, 2.0]).view(1, 3, 1)
    train = SeriesSplit(series, torch.zeros(10, dtype=torch.long))
    monkeypatch.setattr(series_read, "load_split", lambda name, split: train)
    bundle = replace(multi, has_dataset=True)
    picked = ADAPTER.background(bundle, 4, seed=1)
    assert picked is not None and picked.shape == (4, 3, STEPS)
    assert torch.equal(picked, ADAPTER.background(bundle, 4, seed=1))
    everything = ADAPTER.background(bundle, 50, seed=1)
    mean, std = torch.tensor([0.0, 1.0, 2.0]).view(1, 3, 1), 2.0
    torch.testing.assert_close(everything, (series - mean) / std)
    assert any(torch.equal(picked[0], row) for row in everything)
    assert ADAPTER.background(multi, 4, seed=1) is None  # no data set linked


def test_a_figure_names_its_units_and_reads_back_from_its_json(uni: ModelBundle) -> None:
    raw = torch.sin(torch.linspace(0, 6, STEPS))[None]
    values = np.linspace(-0.5, 1.0, STEPS).astype(np.float32)
    labels = ADAPTER.to_maps(uni, raw[None], MethodOutput(attributions=torch.from_numpy(values)[None, None])).labels
    assert labels is not None
    spec = get_method("saliency", "image")  # a gradient method's declared facts; the series words come from the adapter
    fig = map_figure(
        spec, values, target=1, classes=("a", "b", "c"), scale=1.0, modality="series", image=raw, words=labels[0]
    )
    assert fig.display == "line" and "standardised value" in fig.legend.units
    assert _png(fig.figure_png).height > _png(fig.map_png).height
    back = MapFigure.from_json(json.loads(json.dumps(fig.to_json())))
    np.testing.assert_allclose(back.values, values)
    assert back.figure_png == fig.figure_png and back.words == fig.words


def test_magnitudes_are_one_batch_of_step_scores() -> None:
    maps = np.array([[1.0, -2.0, 0.0], [0.5, 0.5, -1.0]], np.float32)
    (batch,) = ADAPTER.magnitudes(maps, None)
    assert batch.dtype == torch.float64 and batch.tolist() == np.abs(maps).tolist()
    assert ADAPTER.map_similarity(maps[0], -maps[0]) == pytest.approx(-1.0)


def test_the_localisation_metrics_say_steps_for_a_series() -> None:
    assert "(the steps known to set the label)" in metric_meaning("rationale_pointing", "series")
    assert "series" in metric_meaning("random_logit", "series")


def test_the_typing_guide_starts_from_a_series_the_adapter_reads(multi: ModelBundle) -> None:
    example = torch.arange(3 * STEPS, dtype=torch.float32).view(3, STEPS) / 7
    guide = ADAPTER.typing_guide(multi.info, example)
    assert "3 channels in order: x, y, z" in guide.caption and "';'" in guide.label
    read, _ = ADAPTER.read_input(guide.example, multi)
    torch.testing.assert_close(read, example, atol=1e-3, rtol=1e-3)
    table = ADAPTER.preview(multi.info, [example, example + 1])
    assert list(table.columns) == ["frames", "x", "y", "z"] and table["y"][1][0] == pytest.approx(
        float(example[1, 0]) + 1
    )


def test_a_forecasts_true_future_is_kept_in_the_report_and_reads_back(uni: ModelBundle) -> None:
    from xaidash.explainers.figures.report import ExplainReport, ReportSettings, session_report

    x = np.linspace(0.0, 1.0, STEPS, dtype=np.float32)[None]
    probs = uni.predict_proba(torch.as_tensor(x)[None]).numpy()
    report = session_report(
        uni,
        "run",
        [("a", x, None), ("b", x, None)],
        np.concatenate([probs, probs]),
        [],
        ReportSettings(methods=[]),
        futures=[(1.5, 2.5), None],
    )
    first, second = report.inputs
    assert first.future == [1.5, 2.5] and second.future is None
    assert first.series is not None and len(first.series[0]) == STEPS  # the future does not replace the series
    d = json.loads(report.to_json())
    assert d["inputs"][0]["future"] == [1.5, 2.5] and "future" not in d["inputs"][1]
    back = ExplainReport.from_json(report.to_json())
    assert back.inputs[0].future == [1.5, 2.5] and back.inputs[1].future is None
