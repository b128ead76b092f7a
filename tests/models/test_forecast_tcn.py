"""The causal dilated CNN forecaster (models/zoo/series_tcn.py): causal (a step never sees a later one), a receptive
field of the documented size covering every window it accepts, one output per step ahead in the series' units, the
anchor's shift invariance, and DeepLift's completeness (every nonlinearity its own module)."""

from __future__ import annotations

import pytest
import torch
from captum.attr import DeepLift

from xaidash.data.modalities import modality_of
from xaidash.data.registry import DatasetInfo, Forecast, RegressionTarget, get_info
from xaidash.models.registry import build_model, get_spec
from xaidash.models.zoo.series_tcn import KERNEL, RECEPTIVE_FIELD, SeriesTCN, receptive_field

FORECASTS = ("airline", "lynx", "shampoo_sales", "seasonal_trend")


def stand_in(window: int = 24, horizon: int = 4) -> DatasetInfo:
    return DatasetInfo(
        "stand_in",
        "series",
        tuple(f"t+{h}" for h in range(1, horizon + 1)),
        (1, window),
        (100.0,),
        (20.0,),
        channel_names=("value",),
        regression=RegressionTarget("value", "", 100.0, 20.0),
        forecast=Forecast(horizon=horizon, window=window, season=12, tail=12),
    )


def built(info: DatasetInfo, **options: object) -> SeriesTCN:
    torch.manual_seed(0)
    model = build_model("series_tcn", info, **options).double().eval()
    assert isinstance(model, SeriesTCN)
    return model


def input_gradient(model: SeriesTCN, steps: int, at: int) -> torch.Tensor:
    """|d features[:, :, at] / d x| summed over channels, per input step, for one random series of `steps` steps."""
    x = torch.randn(1, 1, steps, dtype=torch.float64, generator=torch.Generator().manual_seed(3), requires_grad=True)
    model.blocks(x)[0, :, at].sum().backward()
    assert x.grad is not None
    return x.grad[0, 0].abs()


def test_the_receptive_field_is_as_documented() -> None:
    assert receptive_field(KERNEL, 6) == 1 + 2 * (1 + 2 + 4 + 8 + 16 + 32) == RECEPTIVE_FIELD == 127


@pytest.mark.parametrize("at", [0, 40, 150, 199])
def test_a_step_sees_exactly_its_receptive_field_of_the_past(at: int) -> None:
    grad = input_gradient(built(stand_in(), anchor=False), 200, at)
    assert grad[at + 1 :].sum() == 0  # causal: nothing later
    first = max(at - RECEPTIVE_FIELD + 1, 0)
    assert grad[:first].sum() == 0  # nothing older than the receptive field
    assert grad[first] > 0 and grad[at] > 0  # both of its ends reach the step


@pytest.mark.parametrize("name", FORECASTS)
def test_every_default_window_fits_the_receptive_field(name: str) -> None:
    info = get_info(name)
    assert info.forecast is not None and info.forecast.window <= RECEPTIVE_FIELD
    assert get_spec("series_tcn").fits(info) is None


def test_fits_refuses_what_it_cannot_forecast() -> None:
    spec = get_spec("series_tcn")
    assert "receptive field" in (spec.fits(stand_in(window=RECEPTIVE_FIELD + 1)) or "")
    classes = DatasetInfo("gun", "series", ("a", "b"), (1, 150), (0.0,), (1.0,))
    assert "forecast" in (spec.fits(classes) or "")


def test_one_output_per_step_in_the_series_units_and_shift_invariant_when_anchored() -> None:
    info = stand_in()
    model = built(info)
    raw = 100.0 + 20.0 * torch.randn(5, 1, 24, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    series = modality_of("series")

    def forecast(values: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return model(series.prepare(values, info, None, torch.device("cpu")).double())

    out = forecast(raw)
    assert out.shape == (5, 4)
    # lifting the whole window by 50 units lifts every step's forecast by 50 units (prepare works in float32)
    torch.testing.assert_close(forecast(raw + 50.0), out + 50.0, atol=1e-3, rtol=0)
    # without the anchor the level matters
    plain = built(info, anchor=False)
    with torch.no_grad():
        x = series.prepare(raw, info, None, torch.device("cpu")).double()
        shifted = series.prepare(raw + 50.0, info, None, torch.device("cpu")).double()
        assert (plain(shifted) - plain(x) - 50.0).abs().max() > 1.0


@pytest.mark.parametrize("anchor", [True, False])
def test_deeplift_attributions_add_up_to_the_change_of_each_step(anchor: bool) -> None:
    model = built(stand_in(), anchor=anchor)
    x = torch.randn(3, 1, 24, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    base = torch.zeros_like(x)
    for h in (0, 3):
        attr = DeepLift(model).attribute(x, baselines=base, target=h)
        with torch.no_grad():
            change = model(x)[:, h] - model(base)[:, h]
        torch.testing.assert_close(attr.sum(dim=(1, 2)), change, atol=1e-6, rtol=1e-6)


def test_grad_cam_layers_are_one_d_conv_maps() -> None:
    """Blocks a user may pick for Grad-CAM, read as 1-D maps; no default (the head reads the last step only)."""
    spec = get_spec("series_tcn")
    model = built(stand_in())
    assert spec.last_conv is None and spec.conv_layers
    for path in spec.conv_layers:
        assert spec.feature_layout(path).kind == "ncl"
        model.get_submodule(path)
