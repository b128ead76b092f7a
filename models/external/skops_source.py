"""`skops:FILE.skops --dataset <a table>`: a scikit-learn classifier or regressor saved with `skops.io.dump` (never
pickle), imported beside your networks for side-by-side comparison (models/external/sklearn_pipeline.py wraps it).

It reads the linked table's columns by name (fitted on a DataFrame) or in order (fitted on an array); a classifier's
classes must be the data set's; a data set with a number to predict takes a regressor, whose `predict` (the value in
the target's units) is the run's one output. The .skops file is copied into the run folder (`pipeline.skops`) and read from there, with the
same trusted types, whenever the run is loaded. Perturbation methods (occlusion, KernelSHAP, LIME), the metrics and
the comparison pages work; gradient and CAM methods are refused: no gradient flows through scikit-learn.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import torch

from xaidash.data.modalities import modality_of
from xaidash.data.registry import DatasetInfo, load_split
from xaidash.models.external.options import ImportOptions
from xaidash.models.external.registry import ImportSource, Loaded, Rebuilt, register
from xaidash.models.external.sklearn_pipeline import (
    PipelineModule,
    class_order,
    input_names,
    read_pipeline,
    settle_categories,
)
from xaidash.models.registry import ModelError

PIPELINE_FILE = "pipeline.skops"
NO_GRADIENTS = (
    "it is a scikit-learn pipeline wrapped for side-by-side comparison and gives no gradients; use occlusion, "
    "KernelSHAP or LIME"
)


def _wrapped(pipeline: Any, info: DatasetInfo, where: str, categories: str = "numbers") -> PipelineModule:
    order, names = class_order(pipeline, info, where), input_names(pipeline, info, where)
    return PipelineModule(pipeline, info, order, names, categories)


def _steps(pipeline: Any) -> str:
    steps = getattr(pipeline, "steps", None)
    return " -> ".join(type(step).__name__ for _, step in steps) if steps else type(pipeline).__name__


def load(argument: str, options: ImportOptions) -> Loaded:
    path = Path(argument).expanduser().resolve()
    info = options.linked
    if info is None or not info.columns:
        raise ModelError(
            f"skops:{argument} needs --dataset naming the table it predicts (its columns, and its classes or number "
            "to predict), e.g. --dataset csv:data.csv?target=label."
        )
    given = [
        flag
        for flag, value in (
            ("--weights", options.weights),
            ("--input-shape", options.input_shape),
            ("--mean", options.mean),
            ("--std", options.std),
            ("--layer", options.layers),
            ("--option", options.model_options),
            ("--vocab", options.vocab),
        )
        if value
    ]
    if given:
        raise ModelError(
            f"{', '.join(given)} do(es) not apply to a scikit-learn pipeline: the .skops file is all it is."
        )
    pipeline = read_pipeline(path, info)
    model = _wrapped(pipeline, info, path.name)
    adapter = modality_of(info.modality)
    probe = adapter.prepare(adapter.example(info, None, 2), info, None, torch.device("cpu"))
    test = load_split(info.name, "test")
    rows = adapter.prepare(adapter.items(test, range(len(test))), info, None, torch.device("cpu"))
    categories = settle_categories(model, rows, test.labels, path.name)

    def copy(run_dir: Path) -> None:
        shutil.copyfile(path, run_dir / PIPELINE_FILE)

    return Loaded(
        model=model,
        modality=info.modality,
        name=options.name or f"skops:{path.stem}",
        num_classes=info.num_classes if info.regression is None else 0,  # a regressor's width: read, then checked
        record={"file": str(path), "pipeline": _steps(pipeline), "categories": categories},
        classes=info.classes,
        input_shape=tuple(info.input_shape),
        files=[copy],
        notes=[f"scikit-learn {_steps(pipeline)}: for side-by-side comparison; gradient and CAM methods do not apply"],
        probe=probe,
        description=f"scikit-learn {_steps(pipeline)} from {path.name} (skops), wrapped for side-by-side comparison"
        + (f"; its predict is the predicted {info.regression.name}." if info.regression is not None else "."),
    )


def rebuild(record: dict[str, Any], run_dir: Path) -> Rebuilt:
    from xaidash.models.runs.store import Run  # the run store imports the import sources' loader: import on use

    run = Run(run_dir)
    info = run.info_in(run.config())
    where = f"{run_dir.name}/{PIPELINE_FILE}"
    return Rebuilt(
        _wrapped(read_pipeline(run_dir / PIPELINE_FILE, info), info, where, str(record.get("categories", "numbers")))
    )


register(
    ImportSource(
        prefix="skops",
        label="scikit-learn pipeline (skops)",
        argument="FILE.skops",
        help="a scikit-learn classifier or regressor saved with skops.io.dump (never pickle), with --dataset naming its "
        "table; "
        "for side-by-side comparison: gradient methods do not apply",
        load=load,
        rebuild=rebuild,
        no_gradients=NO_GRADIENTS,
    )
)
