"""Screenshots of every dashboard page, as a person sees them, for the README and reviews.

    python scripts/screenshots.py [--runs DIR] [--out docs/screenshots] [--widths 1440 1024] [--port 8655]

Uses the runs under --runs; when it holds none of the demo runs, trains them first (`xaidash demo`,
about 90 s on a 2-core CPU). Then serves the app on that root, opens each page in Debian's Chromium
(Playwright, never `playwright install`) at each width, waits until Streamlit has finished drawing,
and saves a full-page PNG `<page>-<width>.png`. Every screenshot shows a finished page: the script waits until
nothing is running (no Streamlit running indicator, no spinner such as "Drawing thumbnails…", no element still
loading). A page still computing after its timeout is not saved (the previous file stays) and is named on stderr.
Exits 1 when a page shows a Python exception or was still computing.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import headless
from headless import CHROMIUM, FLAGS
from PIL import Image
from playwright.sync_api import Page, sync_playwright

from xaidash.models.training.demo import latest_demo_runs

# (file name, URL path, which demo run it shows: image CNN, ViT or text transformer; None: no run needed);
# a page in PRESS gets that button pressed first, so the screenshot shows its results.
PAGES = [
    ("home", "", None),
    ("train", "train", "cnn"),
    ("import", "import", None),
    ("explain-image", "explain", "cnn"),
    ("explain-text", "explain", "text"),
    ("side-by-side", "side-by-side", "cnn"),
    ("compare", "compare", "cnn"),
    ("compare-dataset-report", "compare", "cnn"),
    ("explain-stored", "explain", "cnn"),
    ("attention-vit", "attention", "vit"),
    ("attention-text", "attention", "text"),
    ("receptive-fields", "receptive-fields", "cnn"),
    ("embeddings", "embeddings", "cnn"),
    ("model", "model", "cnn"),
]
PRESS = {"compare": "Compare"}
# Pages shown in a state of their own: more of the address (the data-set report reads the CNN run's attribution
# store, which `store_for` writes first; the stored view opens its misclassified sample of highest loss).
QUERY = {"compare-dataset-report": "compare_view=Whole+data+set", "explain-stored": "stored=test:{worst}"}
STORE_INPUT = "dataset:all"
STORE_METHODS = "saliency,ig,gradcam"
DEMO_MODELS = {"cnn": "resnet_small", "vit": "vit_tiny", "text": "text_transformer"}
PAGE_TIMEOUT_S = 240  # a page that computes (Compare, Embeddings) may take minutes on a loaded 2-core CPU


def demo_runs(root: Path) -> dict[str, str]:
    """{'cnn': run id, ...}: the newest completed run of each demo model under root."""
    latest = latest_demo_runs(root)
    return {key: latest[model] for key, model in DEMO_MODELS.items() if model in latest}


def store_for(root: Path, run_id: str) -> int:
    """Explain the run's test split into its attribution store unless it has one (`xaidash explain --input
    dataset:all`: 21 min for 1,000 images and 3 methods on a loaded 2-core CPU, IG most of it; once per runs
    root); the index of its misclassified sample of highest loss."""
    from xaidash.explainers.dataset.store import open_store
    from xaidash.models.runs.store import Run

    run = Run(root / run_id)
    if open_store(run.path, "test") is None:
        print(f"explaining the test split of {run_id} into its attribution store ...", flush=True)
        cmd = ["xaidash", "explain", "--run", run_id, "--input", STORE_INPUT, "--methods", STORE_METHODS]
        subprocess.run([*cmd, "--metrics", "--quiet"], env={**os.environ, "XAIDASH_RUNS": str(root)}, check=True)
    store = open_store(run.path, "test")
    assert store is not None
    samples = store.samples()
    wrong = samples[~samples["correct"]]
    return int((wrong if len(wrong) else samples).sort_values("loss", ascending=False)["index"].iloc[0])


def wait_drawn(page: Page, timeout_s: float) -> None:
    """Until the page has been idle for 3 s, then a second for charts to settle."""
    headless.wait_drawn(page, timeout_s, quiet_checks=3, interval_s=1.0)
    time.sleep(1)


# What a page shows while it is still computing: Streamlit's running indicator, spinners (st.spinner, and the
# show_spinner of cached functions, e.g. Embeddings' "Drawing thumbnails…"), placeholders of elements still
# loading, and any visible text that announces work in progress ("Running…", "Loading the model…").
BUSY_SIGNS_JS = r"""() => {
  const found = [];
  const shown = el => !!el && el.getClientRects().length > 0;
  if (document.querySelector("[data-testid='stStatusWidget']")) found.push("Streamlit's running indicator");
  for (const el of document.querySelectorAll("[data-testid='stSpinner']"))
    found.push("a spinner " + JSON.stringify((el.innerText || "").trim() || "(no text)"));
  if (document.querySelector("[data-testid='stSkeleton']")) found.push("an element still loading (a placeholder)");
  const busy = /^(Drawing|Running|Loading|Computing|Predicting|Placing|Importing)\b.*(…|\.\.\.)$/;
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const text = walker.currentNode.textContent.trim(), parent = walker.currentNode.parentElement;
    const inSpinner = parent && parent.closest && parent.closest("[data-testid='stSpinner']");
    if (busy.test(text) && shown(parent) && !inSpinner) found.push("the text " + JSON.stringify(text));
  }
  return [...new Set(found)];
}"""


class PageStillBusy(Exception):
    """A page still computing when its time ran out: its screenshot would not show the finished page."""


def busy_signs(page: Page) -> list[str]:
    """What the page shows that says it is still computing; empty once it has finished."""
    return [str(sign) for sign in page.evaluate(BUSY_SIGNS_JS)]


def wait_finished(page: Page, name: str, timeout_s: float, quiet_checks: int = 3, interval_s: float = 1.0) -> None:
    """Until the page has shown no sign of computing (`busy_signs`) for `quiet_checks` checks in a row,
    `interval_s` apart; PageStillBusy naming the page and what it still shows once `timeout_s` have passed."""
    deadline, quiet = time.monotonic() + timeout_s, 0
    while True:
        signs = busy_signs(page)
        quiet = 0 if signs else quiet + 1
        if quiet >= quiet_checks or (not signs and time.monotonic() >= deadline):
            return
        if time.monotonic() >= deadline:
            raise PageStillBusy(
                f"{name} still shows {'; '.join(signs)} after {timeout_s:.0f} s: not finished, not saved"
            )
        time.sleep(interval_s)


def shoot(page: Page, url: str, width: int, path: Path, compact: bool = True, press: str | None = None) -> int:
    """Save one full-page screenshot of the finished page; the number of Python exceptions the page shows.
    PageStillBusy, and nothing saved, when the page is still computing after PAGE_TIMEOUT_S."""
    name = f"page {path.stem} ({url})"
    started = time.monotonic()
    page.set_viewport_size({"width": width, "height": 1000})
    page.goto(url)
    wait_drawn(page, PAGE_TIMEOUT_S)
    if press:
        page.get_by_role("button", name=press, exact=True).click()
        page.wait_for_timeout(1000)
        # Long computations show a progress bar while the script is between redraws: wait until it is gone.
        page.wait_for_function(
            "() => !document.querySelector('[data-testid=stProgress]')", timeout=PAGE_TIMEOUT_S * 1000
        )
        wait_drawn(page, PAGE_TIMEOUT_S)
    wait_finished(page, name, max(30.0, PAGE_TIMEOUT_S - (time.monotonic() - started)))
    for _ in range(3):  # elements drawn only once in view (data grids) make the page grow: measure until it stops
        height = page.evaluate("() => (document.querySelector('[data-testid=stMain]') || document.body).scrollHeight")
        wanted = min(max(1000, int(height) + 40), 16000)
        if wanted == page.viewport_size["height"]:  # type: ignore[index]
            break
        page.set_viewport_size({"width": width, "height": wanted})
        time.sleep(2)  # charts re-lay out to the new viewport
    wait_finished(page, name, 30.0, quiet_checks=2)  # the new viewport may have set something computing
    shot_path = path.with_name(f".{path.stem}.partial.png")  # the previous screenshot stays until this one is good
    page.screenshot(path=str(shot_path), full_page=True)
    signs = busy_signs(page)
    if signs:
        shot_path.unlink(missing_ok=True)
        raise PageStillBusy(f"{name} showed {'; '.join(signs)} while it was being taken: not saved")
    if compact:  # 256 colours: a few hundred kB a page instead of megabytes, for the repository's docs
        with Image.open(shot_path) as shot:
            quantized = shot.convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
        quantized.save(shot_path, format="PNG", optimize=True)
    shot_path.replace(path)
    return page.locator("[data-testid='stException']").count()


def serve(root: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "XAIDASH_RUNS": str(root)}
    cmd = [sys.executable, "-m", "xaidash.dashboard.cli", "serve", "--port", str(port)]
    proc = subprocess.Popen(cmd, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    for _ in range(240):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2)
            return proc
        except OSError:
            time.sleep(0.5)
    proc.terminate()
    raise SystemExit(f"the dashboard did not start; see {log}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=Path, default=Path(tempfile.gettempdir()) / "xaidash-screenshots" / "runs")
    ap.add_argument("--out", type=Path, default=Path("docs/screenshots"))
    ap.add_argument("--widths", type=int, nargs="+", default=[1440, 1024])
    ap.add_argument("--port", type=int, default=8655)
    ap.add_argument("--only", nargs="+", help="shoot only these pages (file names, e.g. compare explain-image)")
    ap.add_argument("--full-colour", action="store_true", help="keep the PNGs in full colour (larger files)")
    args = ap.parse_args()
    os.environ.setdefault("XAIDASH_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    args.runs.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    runs = demo_runs(args.runs)
    if len(runs) < len(DEMO_MODELS):
        print(f"training the demo runs into {args.runs} ...", flush=True)
        subprocess.run(["xaidash", "demo", "--quiet"], env={**os.environ, "XAIDASH_RUNS": str(args.runs)}, check=True)
        runs = demo_runs(args.runs)
    wanted = [name for name, _, _ in PAGES if not args.only or name in args.only]
    worst = store_for(args.runs, runs["cnn"]) if any(name in QUERY for name in wanted) else 0
    proc = serve(args.runs, args.port, args.runs.parent / "server.log")
    failed: list[str] = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
            page = browser.new_page()
            for name, path, which in PAGES:
                if args.only and name not in args.only:
                    continue
                query = f"?run={runs[which]}" if which else ""
                if name in QUERY:
                    query += "&" + QUERY[name].format(worst=worst)
                for width in args.widths:
                    target = args.out / f"{name}-{width}.png"
                    started = time.perf_counter()
                    try:
                        errors = shoot(
                            page,
                            f"http://127.0.0.1:{args.port}/{path}{query}",
                            width,
                            target,
                            not args.full_colour,
                            PRESS.get(name),
                        )
                    except PageStillBusy as e:
                        print(f"FAILED: {e}", file=sys.stderr, flush=True)
                        failed.append(f"{name}-{width} (still computing)")
                        continue
                    if errors:
                        failed.append(f"{name}-{width} ({errors} exception(s))")
                    note = f"  {errors} exception(s) on the page" if errors else ""
                    print(f"{target}  ({time.perf_counter() - started:.0f} s){note}", flush=True)
            browser.close()
    finally:
        proc.terminate()
        proc.wait(15)
    if failed:
        print(f"{len(failed)} screenshot(s) not taken or showing an error: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
