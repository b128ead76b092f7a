"""Who may use the dashboard (issue 12): a token when it is reachable beyond this machine, only known Host
names (DNS rebinding), checked in the app itself and through `xaidash serve` in Chromium."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from xaidash.dashboard.access import allowed_hosts, host_allowed, host_name, token_matches
from xaidash.dashboard.cli import access_env

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")


def test_host_names_are_read_from_the_header() -> None:
    assert host_name("Example.org:8501") == "example.org"
    assert host_name("[::1]:8501") == "::1"
    assert host_name("127.0.0.1") == "127.0.0.1"


def test_only_allowed_host_names_pass() -> None:
    local = ",".join(allowed_hosts("127.0.0.1") or [])
    assert host_allowed("127.0.0.1:8501", local) and host_allowed("localhost:8501", local)
    assert not host_allowed("evil.test:8501", local)  # a rebinding attacker's name for 127.0.0.1
    assert allowed_hosts("0.0.0.0") is None and host_allowed("anything:1", "*")


def test_serve_requires_a_token_beyond_localhost() -> None:
    env, token = access_env("127.0.0.1", None)
    assert token is None and "XAIDASH_TOKEN" not in env and "evil" not in env["XAIDASH_ALLOWED_HOSTS"]
    env, token = access_env("0.0.0.0", None)
    assert token and len(token) >= 24 and env["XAIDASH_TOKEN"] == token and env["XAIDASH_ALLOWED_HOSTS"] == "*"
    assert access_env("0.0.0.0", "given")[1] == "given"
    assert token_matches("given", "given") and not token_matches("", "given") and not token_matches(None, "given")


def test_the_app_shows_nothing_without_the_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XAIDASH_TOKEN", "s3cret-token")
    at = AppTest.from_file(APP, default_timeout=120).run()
    assert [t.label for t in at.text_input] == ["Access token"] and not at.exception
    assert not any("Runs" in s.value for s in at.subheader)  # Home is not drawn
    at.text_input[0].input("wrong")
    at.button[0].click().run()
    assert any("not the token" in e.value for e in at.error)
    at.text_input[0].input("s3cret-token")
    at.button[0].click().run()
    assert not at.text_input or at.text_input[0].label != "Access token"


def test_a_token_link_opens_the_app(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XAIDASH_TOKEN", "s3cret-token")
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["token"] = "s3cret-token"
    at.run()
    assert not any(t.label == "Access token" for t in at.text_input) and not at.exception
    assert "token" not in at.query_params


@contextlib.contextmanager
def xaidash_serve(tmp_path: Path, *options: str) -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = (tmp_path / f"serve-{port}.log").open("w")
    cmd = [sys.executable, "-m", "xaidash.dashboard.cli", "serve", "--port", str(port), *options]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 90
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2)
                break
            except OSError:
                assert proc.poll() is None and time.time() < deadline, (tmp_path / f"serve-{port}.log").read_text()
                time.sleep(0.3)
        yield port
    finally:
        proc.terminate()
        proc.wait(20)
        log.close()


@pytest.mark.browser
def test_in_chromium_a_rebound_name_gets_nothing_and_a_public_server_asks_for_its_token(tmp_path: Path) -> None:
    from browser import CHROMIUM, FLAGS, require_browser

    sync_api = require_browser()
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM), args=[*FLAGS, "--host-resolver-rules=MAP evil.test 127.0.0.1"]
        )
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.set_default_timeout(90_000)
        try:
            with xaidash_serve(tmp_path) as port:
                page.goto(f"http://evil.test:{port}/")
                page.get_by_text("does not answer to the host name 'evil.test'").wait_for()
                assert page.get_by_role("heading", name="xaidash").count() == 0
                page.goto(f"http://127.0.0.1:{port}/")
                page.get_by_role("heading", name="xaidash").wait_for()
            with xaidash_serve(tmp_path, "--host", "0.0.0.0", "--token", "t0k3n-for-tests") as port:
                assert "t0k3n-for-tests" in (tmp_path / f"serve-{port}.log").read_text()
                page.goto(f"http://127.0.0.1:{port}/")
                page.get_by_label("Access token").wait_for()
                page.goto(f"http://127.0.0.1:{port}/?token=t0k3n-for-tests")
                page.get_by_role("heading", name="xaidash").wait_for()
                page.wait_for_function("() => !location.search.includes('token')")
        finally:
            page.screenshot(path=str(tmp_path / "access.png"), full_page=True)
            browser.close()
