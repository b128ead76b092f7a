"""Fixtures for the dashboard tests: small trained runs shared by a module, and PNG/text payloads."""
from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image

from models.engine import TrainConfig, train

APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"


@pytest.fixture(scope="session")
def trained_root(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A runs root with a quick shapes/mlp (image) and cues/text_cnn (text) run: {'root', 'image', 'text'}."""
    root = tmp_path_factory.mktemp("dash_runs")
    out = {"root": str(root)}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XAIDASH_RUNS", str(root))
        mp.setenv("XAIDASH_OFFLINE", "1")
        for name, ds, model in (("image", "shapes", "mlp"), ("text", "cues", "text_cnn")):
            result = train(TrainConfig(dataset=ds, model=model, epochs=1, batch_size=64, max_train_samples=600))
            assert result.state == "completed", result.error
            out[name] = result.run.id
    return out


@pytest.fixture
def runs(trained_root: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Point XAIDASH_RUNS at the shared trained runs (after conftest's per-test isolation)."""
    monkeypatch.setenv("XAIDASH_RUNS", trained_root["root"])
    return trained_root


def png(width: int = 40, height: int = 30, mode: str = "RGB", colour=(200, 40, 40)) -> bytes:
    img = Image.new(mode, (width, height), colour if mode != "1" else 0)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture
def make_png():
    """png(width, height, mode, colour) -> PNG bytes."""
    return png
