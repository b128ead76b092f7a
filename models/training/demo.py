"""The quick-start demo: the runs that make every page meaningful, trained one after another with their recipes.

An image CNN with global average pooling (Explain, Compare, CAM, receptive fields, embeddings), a
ViT (attention on images) and a text transformer (attention and word attributions), each on a
built-in data set that works offline. `xaidash demo` and the Home page's quick-start button train these.
"""

from __future__ import annotations

from pathlib import Path

DEMO_RUNS: tuple[tuple[str, str], ...] = (
    ("shapes", "resnet_small"),
    ("shapes", "vit_tiny"),
    ("cues", "text_transformer"),
)


def latest_demo_runs(root: Path | None = None) -> dict[str, str]:
    """{model name: run id} of the newest completed run of each demo model under the runs root (damaged
    folders skipped): what the screenshot script and the soak test show."""
    from xaidash.models.runs.store import list_runs

    wanted = {model for _, model in DEMO_RUNS}
    found: dict[str, str] = {}
    for run in list_runs(root):  # newest first
        try:
            model, state = run.config()["model"], run.summary().get("state")
        except Exception:  # noqa: BLE001 - a damaged folder is not a demo run
            continue
        if model in wanted and state == "completed":
            found.setdefault(model, run.id)
    return found
