"""SaeConfig on its own: round trip through JSON, the settings check without a model, the expected time."""

from __future__ import annotations

import dataclasses

import pytest

from xaidash.models.language.sae.config import Rates, SaeConfig, expected_seconds
from xaidash.models.registry import ModelError


def test_json_round_trip_and_defaults_are_valid():
    config = SaeConfig(layer=15)
    config.check_settings()
    assert SaeConfig.from_json(config.to_json()) == config
    assert SaeConfig.from_json({**config.to_json(), "unknown": 1}) == config
    assert config.total_steps == config.tokens // config.batch_tokens


@pytest.mark.parametrize(
    ("change", "message"),
    [({"width": 0}, "Width"), ({"k": 0}, "k 0"), ({"context": 2}, "Context"), ({"batch_tokens": 0}, "batch")],
)
def test_check_settings_refuses_with_one_line(change, message):
    with pytest.raises(ModelError, match=message) as e:
        dataclasses.replace(SaeConfig(layer=1), **change).check_settings()
    assert "\n" not in str(e.value)


def test_expected_time_scales_with_tokens_width_and_depth():
    base = SaeConfig(layer=15, tokens=100_000, width=1024)
    rates = Rates(layer_tokens_s=1000.0, train_macs_s=1e9)
    t = expected_seconds(base, 576, 30, rates)
    assert t["harvest"] == pytest.approx((100_000 + base.heldout_tokens) * 16 / 1000.0)
    assert t["train"] == pytest.approx(3 * 576 * 1024 * 100_000 / 1e9)
    assert t["total"] == pytest.approx(t["harvest"] + t["train"] + t["evaluate"])
    wider = expected_seconds(dataclasses.replace(base, width=2048), 576, 30, rates)
    assert wider["train"] == pytest.approx(2 * t["train"])
