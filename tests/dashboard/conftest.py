"""Fixtures for the dashboard tests: two runs shared by the session, PNG payloads, and a served app."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from headless import serving
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


@pytest.fixture(scope="session")
def serve_app():
    """`with serve_app(runs_root, log_path) as url:` serves the app for a browser test."""
    return serving


@pytest.fixture
def fresh_jobs():
    """A new training job manager for the test: AppTest sessions in one worker process share the server's (a
    `st.cache_resource`), so a job another test started would show on this test's Train page."""
    from xaidash.dashboard.services import job_manager

    job_manager.clear()
    yield
    job_manager.clear()
