"""The quick-start demo: the runs that make every page meaningful, trained one after another with their recipes.

An image CNN with global average pooling (Explain, Compare, CAM, receptive fields, embeddings), a
ViT (attention on images) and a text transformer (attention and word attributions), each on a
built-in data set that works offline. `xaidash demo` and the Home page's quick-start button train these.

How long it takes, measured (the whole quick start, three runs one after another on the CPU): about 75-90 s on a
quiet 2-core machine; 555 s on the same machine while four other trainings and a browser shared its cores
(docs/training.md). `QUICK_START_TIME` says so wherever the time is promised; `planned_steps` gives the steps
each run will take before any starts, so progress can count steps across the runs.
"""

from __future__ import annotations

from pathlib import Path

from xaidash.models.training.config import TrainConfig

DEMO_RUNS: tuple[tuple[str, str], ...] = (
    ("shapes", "resnet_small"),
    ("shapes", "vit_tiny"),
    ("cues", "text_transformer"),
)
QUICK_START_TIME = (
    "about 1.5 minutes on a quiet 2-core CPU, up to about 10 minutes when other work shares the machine's cores, "
    "less on a GPU"
)


def planned_steps(cfg: TrainConfig) -> int:
    """The optimizer steps a new run of `cfg` will take: its training split less the validation share (capped at
    max_train_samples), in batches, times the epochs, each setting left open taken from the recipe, counted by the
    engine's own `used_and_held_out` and `steps_per_epoch`. Loads the training split (built-in data sets are
    generated once per process and cached, so the run that follows does not load it again); DatasetError when it
    cannot be loaded."""
    from xaidash.data.registry import load_split
    from xaidash.models.training.batches import steps_per_epoch
    from xaidash.models.training.data import used_and_held_out

    cfg = cfg.with_recipe()
    settings = cfg.settings()
    used, held_out = used_and_held_out(
        len(load_split(cfg.dataset, "train")), settings.max_train_samples, cfg.val_fraction
    )
    return steps_per_epoch(used - held_out, settings.batch_size, cfg.nproc) * settings.epochs


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
