"""Fixtures for the dashboard tests: small trained runs shared by a module, and PNG/text payloads."""

from __future__ import annotations

import contextlib
import io
import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from xaidash.models.engine import TrainConfig, train

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


@contextlib.contextmanager
def _serving(runs_root: Path, log_path: Path) -> Iterator[str]:
    """`xaidash serve` (the real launcher's command line) on a free localhost port, until the block ends."""
    from xaidash.dashboard.cli import serve_command

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "XAIDASH_RUNS": str(runs_root), "XAIDASH_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    with open(log_path, "w") as log:
        proc = subprocess.Popen(serve_command("127.0.0.1", port), env=env, stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.time() + 60
            while True:
                try:
                    urllib.request.urlopen(f"{url}/_stcore/health", timeout=2)
                    break
                except OSError as err:
                    if proc.poll() is not None or time.time() > deadline:
                        raise RuntimeError(f"server did not start:\n{log_path.read_text()}") from err
                    time.sleep(0.3)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.fixture(scope="session")
def serve_app():
    """`with serve_app(runs_root, log_path) as url:` serves the app for a browser test."""
    return _serving
