"""Soak test for the dashboard: several browser sessions against one server for minutes, one training job.

    python bench/soak.py [--sessions 4] [--minutes 10] [--runs DIR] [--out soak.json]

Starts `xaidash serve` on a runs root holding the demo runs (trained first with `xaidash demo` when
missing), opens N sessions in Debian's Chromium and lets them take turns: each visits the next page of
its tour (Explain with several methods on an image and on a text run, Attention, Model, Side by side,
Receptive fields, Home), waits until Streamlit has drawn it and counts Python exceptions on it. Session 1
also starts a training job (Home's quick start) at the beginning. The server's memory (resident set of
`xaidash serve` and its descendants, read from /proc) is sampled every 15 s. Prints the page visits, the exceptions
(there must be none), the memory at the start, the peak and the end, and the growth over the last
third of the run (it must level off); writes the same as JSON to --out.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

from xaidash.models.training.demo import latest_demo_runs

# scripts/headless.py, the developer tools' Chromium driver, is not part of the installed package: load it by path.
_spec = importlib.util.spec_from_file_location(
    "headless", Path(__file__).resolve().parents[1] / "scripts" / "headless.py"
)
assert _spec is not None and _spec.loader is not None
headless = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(headless)
CHROMIUM = headless.CHROMIUM
FLAGS = headless.FLAGS
wait_drawn = headless.wait_drawn


TOUR = [
    ("explain", "cnn"),
    ("attention", "text"),
    ("model", "cnn"),
    ("explain", "text"),
    ("side-by-side", "cnn"),
    ("receptive-fields", "cnn"),
    ("attention", "vit"),
    ("", None),  # Home: the default page lives at the root
]
DEMO_MODELS = {"cnn": "resnet_small", "vit": "vit_tiny", "text": "text_transformer"}


def demo_runs(root: Path) -> dict[str, str]:
    """{'cnn': run id, ...}: the newest completed run of each demo model under root."""
    latest = latest_demo_runs(root)
    return {key: latest[model] for key, model in DEMO_MODELS.items() if model in latest}


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def server_rss_mb(pid: int) -> float:
    """Resident memory of a process and all its descendants, from /proc (Linux), in MiB."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            continue
        todo += _children(p)
    return total / 2**20


def drawn(page: Page, timeout_s: float = 180) -> None:
    wait_drawn(page, timeout_s, quiet_checks=2, interval_s=0.5)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=4)
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--runs", type=Path, default=Path(tempfile.gettempdir()) / "xaidash-soak" / "runs")
    ap.add_argument("--out", type=Path, default=Path("soak.json"))
    args = ap.parse_args()
    os.environ.setdefault("XAIDASH_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    env = {**os.environ, "XAIDASH_RUNS": str(args.runs)}
    args.runs.mkdir(parents=True, exist_ok=True)
    runs = demo_runs(args.runs)
    if len(runs) < len(DEMO_MODELS):
        subprocess.run([sys.executable, "-m", "xaidash.dashboard.cli", "demo", "--quiet"], env=env, check=True)
        runs = demo_runs(args.runs)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = (args.runs.parent / "soak-server.log").open("w")
    cmd = [sys.executable, "-m", "xaidash.dashboard.cli", "serve", "--port", str(port)]
    serve = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    for _ in range(240):
        try:
            urllib.request.urlopen(f"{base}/_stcore/health", timeout=2)
            break
        except OSError:
            time.sleep(0.5)
    proc = serve.pid
    memory: list[tuple[float, float]] = []
    visits, exceptions, failures = 0, [], []
    started = time.time()
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
            pages = [
                browser.new_context(viewport={"width": 1440, "height": 1000}).new_page() for _ in range(args.sessions)
            ]
            for page in pages:
                page.set_default_timeout(180_000)
                page.goto(f"{base}/")
                drawn(page)
            memory.append((0.0, server_rss_mb(proc)))
            start_button = pages[0].get_by_role("button", name="Train the demo models")
            if start_button.count():
                start_button.first.click()  # one training job while the others explain
            turn, last_sample = 0, time.time()
            while time.time() - started < args.minutes * 60:
                i = turn % args.sessions
                name, which = TOUR[(turn // args.sessions + i) % len(TOUR)]
                query = f"?run={runs[which]}" if which else ""
                try:
                    pages[i].goto(f"{base}/{name}{query}")
                    drawn(pages[i])
                    errors = pages[i].locator("[data-testid='stException']").count()
                    if errors:
                        exceptions.append(f"session {i + 1}: {name}{query}: {errors}")
                except Exception as e:  # noqa: BLE001 - a timeout is a finding, not the end of the soak
                    failures.append(f"session {i + 1}: {name}{query}: {type(e).__name__}: {str(e)[:200]}")
                visits += 1
                turn += 1
                if time.time() - last_sample >= 15:
                    memory.append((time.time() - started, server_rss_mb(proc)))
                    last_sample = time.time()
            memory.append((time.time() - started, server_rss_mb(proc)))
            browser.close()
    finally:
        serve.terminate()
        serve.wait(20)
        log.close()
    third = [m for t, m in memory if t >= memory[-1][0] * 2 / 3]
    report = {
        "sessions": args.sessions,
        "minutes": round((time.time() - started) / 60, 1),
        "page_visits": visits,
        "exceptions": exceptions,
        "timeouts_or_errors": failures,
        "memory_mb": {
            "start": round(memory[0][1]),
            "peak": round(max(m for _, m in memory)),
            "end": round(memory[-1][1]),
            "last_third_growth": round(third[-1] - third[0]) if len(third) > 1 else 0,
        },
        "samples": [(round(t), round(m)) for t, m in memory],
    }
    args.out.write_text(json.dumps(report, indent=2))
    print(json.dumps({k: v for k, v in report.items() if k != "samples"}, indent=2))
    return 1 if exceptions or failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
