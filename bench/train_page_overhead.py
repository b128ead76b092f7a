"""Does watching a training slow it down? The same run started from the Train page, once with the page left open
(its live view redrawing) and once with the tab closed right after Start, in one server, alternating.

    python bench/train_page_overhead.py [--dataset shapes] [--model resnet_small] [--epochs 2] [--cap 2000]
                                         [--repeats 2] [--runs DIR]

Each run's own training time (summary.json `train_seconds`, measured by the trainer in its child process) is
compared; the last line reads `page open S s, page closed S s, ratio R x` (the issue's goal: within 20%).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

# scripts/headless.py, the developer tools' Chromium driver, is not part of the installed package: load it by path.
_spec = importlib.util.spec_from_file_location(
    "headless", Path(__file__).resolve().parents[1] / "scripts" / "headless.py"
)
assert _spec is not None and _spec.loader is not None
headless = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(headless)
CHROMIUM = headless.CHROMIUM
FLAGS = headless.FLAGS
serving = headless.serving
wait_drawn = headless.wait_drawn


def _finished_runs(root: Path) -> dict[str, dict]:
    out = {}
    for summary in root.glob("*/summary.json"):
        with open(summary) as f:
            s = json.load(f)
        if s.get("state") in ("completed", "stopped", "failed"):
            out[summary.parent.name] = s
    return out


def _start(page: Page, base: str, epochs: int, cap: int) -> None:
    page.goto(f"{base}/train")
    page.get_by_role("heading", name="Train", exact=True).wait_for()
    wait_drawn(page, 180, quiet_checks=2, interval_s=0.5)
    field = page.get_by_role("spinbutton", name="Epochs")
    field.fill(str(epochs))
    field.press("Tab")
    page.get_by_text("More: label smoothing, sample cap, validation, seed").click()
    box = page.get_by_role("spinbutton", name="Use at most this many training samples (0 = all)")
    box.fill(str(cap))
    box.press("Tab")
    wait_drawn(page, 60, quiet_checks=2, interval_s=0.5)
    page.get_by_role("button", name="Start training").click()


def _one_run(page: Page, base: str, root: Path, args: argparse.Namespace, keep_open: bool) -> float:
    before = set(_finished_runs(root))
    _start(page, base, args.epochs, args.cap)
    if not keep_open:
        page.wait_for_timeout(1500)  # the job has been handed to the server's job manager
        page.goto("about:blank")  # the tab no longer shows the app: its session ends
    deadline = time.time() + 1800
    while time.time() < deadline:
        new = {k: v for k, v in _finished_runs(root).items() if k not in before}
        if new:
            (summary,) = new.values()
            if summary["state"] != "completed":
                raise RuntimeError(f"run ended {summary['state']}: {summary.get('error')}")
            return float(summary["train_seconds"])
        time.sleep(1.0)
    raise TimeoutError("the run did not finish in 30 minutes")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--cap", type=int, default=2000, help="training samples per epoch (the form's sample cap)")
    ap.add_argument("--repeats", type=int, default=2, help="runs of each kind, alternating (default %(default)s)")
    ap.add_argument("--runs", type=Path, default=Path(tempfile.mkdtemp(prefix="xaidash-overhead-")))
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    args.runs.mkdir(parents=True, exist_ok=True)
    times: dict[str, list[float]] = {"open": [], "closed": []}
    with serving(args.runs, args.runs / "server.log") as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        page.set_default_timeout(180_000)
        for i in range(args.repeats):
            for kind in ("closed", "open") if i % 2 == 0 else ("open", "closed"):
                seconds = _one_run(page, base, args.runs, args, keep_open=kind == "open")
                times[kind].append(seconds)
                print(f"run {i + 1}, page {kind}: {seconds:.1f} s", flush=True)
        browser.close()
    opened, closed = statistics.median(times["open"]), statistics.median(times["closed"])
    print(f"page open {opened:.1f} s, page closed {closed:.1f} s, ratio {opened / closed:.2f} x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
