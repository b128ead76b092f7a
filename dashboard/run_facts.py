"""What the pages say about a run, as plain data: table rows, readable settings, what a stopped run kept.

No Streamlit here, so every sentence the pages show about a run can be tested on its own. Summaries
written by older engines lack `partial_steps`, `steps_per_epoch` and `kept`: everything reads them
defensively and says less rather than something wrong.
"""

from __future__ import annotations

import time
from typing import Any

from xaidash.dashboard.components.scene_facts import scene_picker_label, scene_row
from xaidash.dashboard.jobs import JobSnapshot
from xaidash.data.formatting import percent, plural, r2_text
from xaidash.models.registry import ModelError
from xaidash.models.runs.quality import problem_badge, quality_label, run_warning
from xaidash.models.runs.scores import headline_text
from xaidash.models.runs.store import WEIGHTS, Run, RunKind, run_liveness
from xaidash.models.runs.table import epochs_cell


def run_kind(run: Run) -> RunKind | None:
    """`Run.kind` ('trained', 'imported', 'language_model', 'scene_model'), or None for a run whose config.json
    cannot be read (it is still listed, and picking it says why it cannot be used)."""
    try:
        return run.kind
    except ModelError:
        return None


def has_weights(run: Run) -> bool:
    """Whether the run holds weights at all: a language model's converted ones, a scene model's settled ones, a
    classifier's latest (finished or not)."""
    return run.usable if run_kind(run) in ("language_model", "scene_model") else run.file(WEIGHTS).exists()


def planned_epochs(config: dict[str, Any], summary: dict[str, Any]) -> int | None:
    epochs = (config.get("train") or {}).get("epochs") or summary.get("epochs")
    return int(epochs) if epochs else None


def epochs_text(config: dict[str, Any], summary: dict[str, Any]) -> str:
    """Complete epochs: '3/5', or '0/5 (+3/47 steps)' when a stop kept part of an epoch (never '1/5' for 3 steps).
    Worded as `xaidash runs` words it."""
    return epochs_cell(summary, planned_epochs(config, summary))


def kept_sentence(summary: dict[str, Any]) -> str:
    """Which weights the run holds, in plain words: the engine's own sentence ('weights after 3 of 47 steps of
    epoch 1; no epoch completed') when it wrote one; for older runs, what their summary allows to say."""
    if summary.get("kept"):
        return str(summary["kept"])
    done = int(summary.get("epochs_done") or 0)
    partial = int(summary.get("partial_steps") or 0)
    if partial:
        per_epoch = summary.get("steps_per_epoch", "?")
        complete = f"{plural(done, 'epoch')} complete" if done else "no epoch completed"
        return f"weights after {partial} of {per_epoch} steps of epoch {done + 1}; {complete}"
    if done:
        return f"weights after epoch {done}"
    return "nothing yet"


def live_state(run: Run, summary: dict[str, Any], job: JobSnapshot | None) -> str:
    """The state column: 'running · 45%' while this server trains it; 'running elsewhere' while another live
    process does (its lock says so); 'interrupted · resumable' (or '· nothing saved') when the process that
    wrote 'running' is gone; else the summary's state."""
    if job is not None and job.active and job.run_id == run.id:
        return f"running · {100 * job.progress:.0f}%" + (" · stopping" if job.stop_requested else "")
    live = run_liveness(run, summary)
    if live.state == "running":
        return "running elsewhere" if live.owner is None else f"running elsewhere (process {live.owner['pid']})"
    if live.interrupted:
        return "interrupted · resumable" if live.resumable else "interrupted · nothing saved"
    return live.state


def state_word(run: Run, summary: dict[str, Any]) -> str:
    """The run's state as a fact (running, interrupted, stopped, completed, failed, imported)."""
    return run_liveness(run, summary).state


def run_row(run: Run, job: JobSnapshot | None = None) -> dict[str, Any]:
    """One row of the runs table (accuracies as percentages, so the column sorts by number)."""
    try:
        if run.kind == "scene_model":  # a detector or segmenter: its mAP or mIoU in their own columns
            return scene_row(run)  # (its live progress: the runs table asks the scene job)
        c, s = run.config(), run.summary()
        acc_val, acc_test = s.get("val_acc"), s.get("test_acc")
        return {
            "run": run.id,
            "model": c["model"],
            "data set": c["dataset"] or ("– (language model)" if run.kind == "language_model" else None),
            "state": live_state(run, s, job),
            "epochs": epochs_text(c, s),
            "val acc": None if acc_val is None else 100 * acc_val,
            "test acc": None if acc_test is None else 100 * acc_test,
            **_r2_cells(s),
            "quality": quality_label(run, s),  # every run gets a verdict: a blank cell read as "not known"
        }  # no date column: the run's id starts with its creation time
    except Exception as e:  # noqa: BLE001 - a damaged run must still be listed (and deletable)
        return {"run": run.id, "model": "?", "data set": "?", "state": f"unreadable: {e}"}


def _r2_cells(summary: dict[str, Any]) -> dict[str, float | None]:
    """A regression run's R² columns (a number to predict has no accuracy); nothing for a classifier, so a table of
    classifiers has no empty R² columns."""
    if summary.get("val_r2") is None and summary.get("test_r2") is None:
        return {}
    return {"val R²": summary.get("val_r2"), "test R²": summary.get("test_r2")}


def picker_label(run: Run) -> str:
    """One run in the run picker, shortest first so a narrow sidebar still shows model, data set and accuracy:
    'resnet_small · shapes · 97.0% · 11-25 19:43'; a run too poor to explain is flagged first and named so
    ('⚠ text_cnn · cues · 50.0% poor · …'); the state when not completed; 'imported' for a model trained elsewhere."""
    try:
        c, s = run.config(), run.summary()
    except Exception:  # noqa: BLE001 - a damaged run is still listed; picking it shows why it cannot be used
        return f"⚠ unreadable · {run.id}"
    when = time.strftime("%m-%d %H:%M", time.localtime(c.get("created", 0)))
    kind = run.kind
    if kind == "scene_model":
        return scene_picker_label(run)
    if kind == "language_model":
        return f"{c.get('model', '?')} · language model · {when}"
    what = f"{c.get('model', '?')} · {c.get('dataset') or 'no data set'}"
    if kind == "imported":
        return f"{what} · imported · {when}"
    acc = headline_text(s)
    flag = _quality(run, s)  # '⚠ poor', '⚠ training failed', '⚠ NaN/inf weights' or ''
    parts = [f"⚠ {what}" if flag else what, f"{acc} {flag.removeprefix('⚠ ')}" if flag else acc, when]
    state = state_word(run, s)
    if state != "completed":
        parts.append(state)
    return " · ".join(parts)


def _quality(run: Run, summary: dict[str, Any]) -> str:
    badge = problem_badge(run, summary)
    if badge:
        return f"⚠ {badge}"
    return "⚠ poor" if summary.get("state") != "running" and run_warning(run) else ""


def _fmt_float(v: Any) -> str:
    return "–" if v is None else f"{v:g}"


def settings_rows(run: Run) -> list[tuple[str, str]]:
    """(setting, value) pairs that describe a run to a person: model, data, the resolved training settings,
    recipe, device, size, state and what it kept."""
    c, s = run.config(), run.summary()
    t = c.get("train") or {}
    recipe = c.get("recipe") or {}
    recipe_text = "–"
    if recipe:
        key = recipe.get("key", "?")
        expected, expected_r2 = recipe.get("expected_acc"), recipe.get("expected_r2")
        tested = r2_text(expected_r2) if expected_r2 is not None else percent(expected) if expected is not None else ""
        recipe_text = f"{key} (tested: {tested})" if tested else f"{key} (untested)"
    samples = " / ".join(str(c.get(k, "–")) for k in ("train_samples", "val_samples", "test_samples"))
    rows = [
        ("model", str(c.get("model", "?"))),
        ("data set", str(c.get("dataset", "?"))),
        ("epochs", str(planned_epochs(c, s) or "–")),
        ("batch size", str(t.get("batch_size", "–"))),
        ("learning rate", _fmt_float(c.get("lr", t.get("lr")))),
        ("optimizer", str(t.get("optimizer", "–"))),
        ("schedule", str(t.get("schedule", "–"))),
        ("augmentation", str(t.get("augment", "–"))),
        ("weight decay", _fmt_float(t.get("weight_decay"))),
        ("seed", str(t.get("seed", "–"))),
        ("validation share", _fmt_float(t.get("val_fraction"))),
        ("training samples used", f"at most {t['max_train_samples']:,}" if t.get("max_train_samples") else "all"),
        ("recipe", recipe_text),
        ("device", str(c.get("device", "–"))),
        ("parameters", f"{c['parameters']:,}" if isinstance(c.get("parameters"), int) else "–"),
        ("samples (train / val / test)", samples),
        ("state", state_word(run, s)),
        ("epochs done", epochs_text(c, s)),
        ("kept", kept_sentence(s) if state_word(run, s) not in ("?", "running") else "–"),
        ("training time", f"{s['train_seconds']:.1f} s" if s.get("train_seconds") is not None else "–"),
        ("samples/s", f"{s['samples_per_s']:,.0f}" if s.get("samples_per_s") else "–"),
    ]
    if t.get("compile") not in (None, "off"):  # what the steps ran as, and why not compiled if it fell back
        rows.append(("steps", str(s.get("compiled") or f"torch.compile ({t['compile']}), not finished")))
    if t.get("channels_last"):
        applied = c.get("memory_format") == "channels_last"
        rows.append(
            ("memory layout", "channels last (NHWC)" if applied else "standard (channels last needs 2-D convolutions)")
        )
    return rows


# A regression run's final numbers in the compare table (its errors in the target's units).
REGRESSION_METRICS = {"test R²": "test_r2", "val R²": "val_r2", "test RMSE": "test_rmse", "test MAE": "test_mae"}


def final_metrics(run: Run) -> dict[str, Any]:
    """The numbers a run ended with, for the compare table (None where a run has none)."""
    s = run.summary()

    def num(key: str) -> float | None:
        v = s.get(key)
        return float(v) if isinstance(v, (int, float)) else None

    def as_pct(key: str) -> float | None:
        v = num(key)
        return None if v is None else 100 * v

    return {
        "test acc": as_pct("test_acc"),
        "val acc": as_pct("val_acc"),
        **({k: num(key) for k, key in REGRESSION_METRICS.items()} if _r2_cells(s) else {}),
        "test loss": num("test_loss"),
        "val loss": num("val_loss"),
        "time (s)": num("train_seconds"),
        "samples/s": num("samples_per_s"),
    }
