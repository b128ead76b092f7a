"""Debian's Chromium as this project drives it headless (tests, screenshots, soak): where it is and its flags.

Playwright's own browser downloads are never used (`playwright install` needs the internet).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def wait_drawn(page: Any, timeout_s: float, quiet_checks: int = 3, interval_s: float = 1.0) -> None:
    """On a Playwright page of the app: until the title is drawn and Streamlit's 'running' status widget has
    been absent for `quiet_checks` checks in a row, `interval_s` apart (at most `timeout_s` seconds)."""
    page.wait_for_selector("h1", timeout=timeout_s * 1000)
    deadline, quiet = time.time() + timeout_s, 0
    while time.time() < deadline and quiet < quiet_checks:
        quiet = quiet + 1 if page.locator("[data-testid='stStatusWidget']").count() == 0 else 0
        time.sleep(interval_s)


@contextlib.contextmanager
def serving(runs_root: Path, log_path: Path, start_timeout_s: float = 60, through_cli: bool = False) -> Iterator[str]:
    """`xaidash serve`'s Streamlit command line on a free localhost port over `runs_root`, its output in `log_path`
    (`through_cli`: the `xaidash serve` command itself, so the log is what a user's terminal shows); yields the base
    URL once the server answers its health check, and stops the server when the block ends."""
    import sys

    from xaidash.dashboard.cli import serve_command

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "XAIDASH_RUNS": str(runs_root), "XAIDASH_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    command = (
        [sys.executable, "-m", "xaidash.dashboard.cli", "serve", "--port", str(port)]
        if through_cli
        else serve_command("127.0.0.1", port)
    )
    with open(log_path, "w") as log:
        proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.time() + start_timeout_s
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
