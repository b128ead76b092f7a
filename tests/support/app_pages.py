"""Driving the whole app in Streamlit's AppTest: make it (optionally with a selected run), open a page,
check that no page raised."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from streamlit.testing.v1 import AppTest

APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"


def make_app(run_id: str | None = None, timeout: float = 120) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=timeout)
    if run_id:
        at.session_state["xai_selected_run"] = run_id
    return at


def assert_ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def open_page(at: AppTest, page: str) -> AppTest:
    at.run()
    at.switch_page(page).run()
    assert_ok(at)
    return at


def texts(elements: Any) -> list[str]:
    return [str(e.value) for e in elements]


def open_run_page(run: Any, page: str, monkeypatch: Any, timeout: float = 120, **state: Any) -> AppTest:
    """The app over `run`'s runs root with `run` selected and `state` preset, switched to views/`page`.py."""
    monkeypatch.setenv("XAIDASH_RUNS", str(run.path.parent))
    at = make_app(run.id, timeout)
    for k, v in state.items():
        at.session_state[k] = v
    return open_page(at, f"views/{page}.py")


def record_starts(monkeypatch: Any) -> list[Any]:
    """The Train page's Start recorded instead of run: the list fills with each config the page would train (the
    page is told the job could not start)."""
    from xaidash.dashboard.services import job_manager
    from xaidash.models.registry import ModelError

    started: list[Any] = []

    def start(cfg: Any) -> None:
        started.append(cfg)
        raise ModelError("stand-in: not started")

    monkeypatch.setattr(job_manager(), "start", start)
    return started
