"""Fixtures for the dashboard tests: two runs shared by the session, PNG payloads, and a served app."""

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
from inspect_runs import make_run
from PIL import Image

APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"


@pytest.fixture(scope="session")
def runs_root(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A runs root with a shapes/mlp (image) and a cues/text_cnn (text) run: {'root', 'image', 'text'}.

    Written in the run-store layout without training (`inspect_runs.make_run`): the pages only read runs,
    and the Train page test and the browser tests cover runs the engine wrote."""
    root = tmp_path_factory.mktemp("dash_runs")
    image = make_run(root, "shapes", "mlp", epochs=1)
    text = make_run(root, "cues", "text_cnn", epochs=1)
    return {"root": str(root), "image": image.id, "text": text.id}


@pytest.fixture
def runs(runs_root: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Point XAIDASH_RUNS at the shared runs (after conftest's per-test isolation)."""
    monkeypatch.setenv("XAIDASH_RUNS", runs_root["root"])
    return runs_root


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
