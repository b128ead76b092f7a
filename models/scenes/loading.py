"""Opening a scene model's run: its model rebuilt from config.json and its safetensors weights, as a `SceneBundle`."""

from __future__ import annotations

from pathlib import Path

from xaidash.models.device import pick_device
from xaidash.models.registry import ModelError
from xaidash.models.runs.checkpoint import load_weights
from xaidash.models.runs.files import WEIGHTS
from xaidash.models.runs.store import Run, resolve_run, weights_problem
from xaidash.models.scenes.bundle import SceneBundle
from xaidash.models.scenes.own_module import own_spec
from xaidash.models.scenes.run_files import scene_facts
from xaidash.models.scenes.zoo import scene_model


def load_scene_run(run: Run | str | Path, device: str | None = "auto", epoch: int | None = None) -> SceneBundle:
    """The run's model in eval mode on `device` (its final or latest weights, or those after `epoch`). `run`: a `Run`,
    a run id (or 'latest') in the runs root, or a run folder's `Path` anywhere (tests, scripts). One-line
    ModelError for a run that is not a scene model's, has no weights yet, failed or holds NaN weights."""
    r = _run(run)
    facts = scene_facts(r)
    # a module of one's own is rebuilt from its record (its code imported again); the zoo's models by their id
    spec = own_spec(facts["module"]) if facts.get("module") else scene_model(str(facts["model"]))
    if epoch is None:
        path = r.file(WEIGHTS)
        if not path.is_file():
            raise ModelError(f"Run {r.id} has no weights yet: wait for its first epoch, or resume it.")
        problem = weights_problem(r)
        if problem is not None:
            raise ModelError(problem)
    else:
        found = dict(r.checkpoints())
        if epoch not in found:
            raise ModelError(f"Run {r.id} has no checkpoint for epoch {epoch} (has {sorted(found) or 'none'}).")
        path = found[epoch]
    classes = tuple(str(c) for c in facts["classes"])
    image_size = int(facts["image_size"])
    model = spec.make(len(classes), image_size)
    load_weights(model, path)
    dev = pick_device(device)
    model.to(dev).eval()
    dataset = facts.get("dataset")  # None: an imported run that names no data set
    return SceneBundle(model, spec, classes, image_size, dev, run=r, dataset=None if dataset is None else str(dataset))


def _run(run: Run | str | Path) -> Run:
    """A Path is taken as the run folder it names (code that made it knows where it is); text is an id, resolved
    inside the runs root (a user's words never reach outside it)."""
    if isinstance(run, Run):
        return run
    if isinstance(run, Path) and (run / "config.json").is_file():
        return Run(run)
    return resolve_run(run)
