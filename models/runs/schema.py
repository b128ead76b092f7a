"""The declared shape of a run folder's JSON files, checked whenever they are read.

A run folder is user-editable data: config.json may be a list, miss keys, hold strings where numbers
belong, or ask for sizes that would allocate terabytes (a vocabulary of 1e9 words, an input of 1e6
pixels per side). jsonschema (already installed with altair) checks each file against the schema below,
so every reader gets one message naming the file and the field instead of a KeyError or an allocation
deep inside a model builder. Keys the schema does not name are allowed: newer versions may add some.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema

from xaidash.data.modalities import MODALITIES
from xaidash.models.registry import ModelError

MAX_CLASSES = 100_000
MAX_SIDE = 4096  # pixels per side of a model input
MAX_VOCAB = 5_000_000
MAX_EPOCHS = 100_000

_count = {"type": "integer", "minimum": 0}
_fraction = {"type": ["number", "null"], "minimum": 0, "maximum": 1}

# A table's columns (data/registry.py TableColumn): what a model standardises and one-hot encodes with.
MAX_COLUMNS = 5000
MAX_CHANNELS = 1024  # per-channel mean and std: an image's colours, a multivariate series' channels
TABLE_COLUMN = {
    "type": "object",
    "required": ["name", "kind"],
    "properties": {
        "name": {"type": "string"},
        "kind": {"enum": ["numeric", "categorical"]},
        "categories": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_CLASSES},
        "low": {"type": "number"},
        "high": {"type": "number"},
        "mean": {"type": "number"},
        "std": {"type": "number", "exclusiveMinimum": 0},
        "median": {"type": "number"},
        "integer": {"type": "boolean"},
    },
    "additionalProperties": False,
}

DATASET_INFO = {
    "type": "object",
    "required": ["name", "modality", "classes"],
    "properties": {
        "name": {"type": "string"},
        "modality": {"enum": sorted(m.id for m in MODALITIES)},
        "classes": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": MAX_CLASSES},
        "input_shape": {
            "type": ["array", "null"],
            "items": {"type": "integer", "minimum": 1, "maximum": MAX_SIDE},
            "maxItems": 3,
        },
        "mean": {"type": ["array", "null"], "items": {"type": "number"}, "maxItems": MAX_CHANNELS},
        "std": {
            "type": ["array", "null"],
            "items": {"type": "number", "exclusiveMinimum": 0},
            "maxItems": MAX_CHANNELS,
        },
        "description": {"type": "string"},
        "builtin": {"type": "boolean"},
        "has_masks": {"type": "boolean"},
        "has_rationales": {"type": "boolean"},
        "source_url": {"type": "string"},
        "columns": {"type": "array", "items": TABLE_COLUMN, "maxItems": MAX_COLUMNS},
        "truth_columns": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_COLUMNS},
        "channel_names": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_CHANNELS},
        "step_name": {"type": "string"},
        "regression": {
            "type": ["object", "null"],
            "required": ["name", "mean", "std"],
            "properties": {
                "name": {"type": "string"},
                "unit": {"type": "string"},
                "mean": {"type": "number"},
                "std": {"type": "number", "exclusiveMinimum": 0},
                "low": {"type": "number"},
                "high": {"type": "number"},
            },
            "additionalProperties": False,
        },
        "forecast": {
            "type": ["object", "null"],
            "required": ["horizon", "window", "season", "tail"],
            "properties": {
                "horizon": {"type": "integer", "minimum": 1, "maximum": MAX_SIDE},
                "window": {"type": "integer", "minimum": 1, "maximum": MAX_SIDE},
                "season": {"type": "integer", "minimum": 1, "maximum": MAX_SIDE},
                "tail": {"type": "integer", "minimum": 1},
            },
            "additionalProperties": False,
        },
        "graph": {
            "type": ["object", "null"],
            "required": ["task", "feature_names"],
            "properties": {
                "task": {"enum": ["node", "graph"]},
                "feature_names": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_CHANNELS},
                "hops": {"type": "integer", "minimum": 0, "maximum": MAX_SIDE},
            },
            "additionalProperties": False,
        },
    },
    # Every key becomes a DatasetInfo field (store.info_from_json): an unknown one is damage, not a newer version's
    # addition (tests/models/test_damaged_runs.py checks these keys are DatasetInfo's fields).
    "additionalProperties": False,
}

MODEL_OPTIONS = {
    "type": "object",
    "properties": {
        "vocab_size": {"type": "integer", "minimum": 2, "maximum": MAX_VOCAB},
        "pad_id": {"type": "integer", "minimum": 0, "maximum": MAX_VOCAB},
        "dropout": {"type": "number", "minimum": 0, "maximum": 1},
        "patch_size": {"type": ["integer", "null"], "minimum": 1, "maximum": MAX_SIDE},
        "freeze_encoder": {"type": "boolean"},
        "channels": {"type": "integer", "minimum": 1, "maximum": MAX_CHANNELS},
        "anchor": {"type": "boolean"},
    },
}

# config.json's `scene_model` (models/scenes/train.py): the model rebuilt from it and the settings resumed with.
SCENE_SETTINGS = {
    "type": "object",
    "required": ["dataset", "model", "epochs", "batch_size", "lr", "seed"],
    "properties": {
        "dataset": {"type": "string", "minLength": 1},
        "model": {"type": "string", "minLength": 1},
        "epochs": {"type": "integer", "minimum": 1, "maximum": MAX_EPOCHS},
        "batch_size": {"type": "integer", "minimum": 1, "maximum": 100_000},
        "lr": {"type": "number", "exclusiveMinimum": 0},
        "seed": {"type": "integer", "minimum": 0, "maximum": 2**32 - 1},
        "train_count": {"type": ["integer", "null"], "minimum": 1},
        "eval_count": {"type": ["integer", "null"], "minimum": 1},
        "device": {"type": "string"},
        "name": {"type": ["string", "null"]},
    },
}
SCENE_MODEL = {
    "type": "object",
    # an imported run (models/scenes/importing.py) has no settings and may name no data set (null)
    "required": ["task", "model", "dataset", "classes", "image_size"],
    "properties": {
        "task": {"enum": ["detect", "segment"]},
        "model": {"type": "string", "minLength": 1},
        "dataset": {"type": ["string", "null"], "minLength": 1},
        "classes": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": MAX_CLASSES},
        "image_size": {"type": "integer", "minimum": 16, "maximum": MAX_SIDE},
        "settings": SCENE_SETTINGS,
        "recipe": {"type": "object"},
    },
}

CONFIG = {
    "type": "object",
    # dataset_info and train are required where they are read (Run.info, resuming): listing a run needs neither.
    "required": ["model", "dataset"],
    "if": {"required": ["source"]},
    "then": {"required": ["modality"]},  # an imported run is rebuilt from its source and modality (models/external)
    "properties": {
        "model": {"type": "string", "minLength": 1},
        "modality": {"enum": sorted(m.id for m in MODALITIES)},
        # A generative language model's run (models/language): what it is and where it came from.
        "language_model": {
            "type": "object",
            "required": ["architecture", "layers", "heads"],
            "properties": {
                "architecture": {"type": "string"},
                "layers": {"type": "integer", "minimum": 1, "maximum": 10_000},
                "heads": {"type": "integer", "minimum": 1, "maximum": 10_000},
                "context": {"type": "integer", "minimum": 0},
                "parameters": {"type": "integer", "minimum": 0},
                "chat_template": {"type": "boolean"},
            },
        },
        # A detector or segmenter of scenes (models/scenes): what it is, what it was trained on and how.
        "scene_model": SCENE_MODEL,
        "source": {
            "type": "object",
            "required": ["kind", "record"],
            "properties": {"kind": {"type": "string"}, "record": {"type": "object"}},
        },
        "dataset": {"type": ["string", "null"], "minLength": 1},  # null: an imported model without a data set
        "created": {"type": "number"},
        "classes": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_CLASSES},
        "dataset_info": DATASET_INFO,
        "model_options": MODEL_OPTIONS,
        "train": {
            "type": "object",
            "properties": {
                "epochs": {"type": ["integer", "null"], "minimum": 1, "maximum": MAX_EPOCHS},
                "batch_size": {"type": ["integer", "null"], "minimum": 1, "maximum": 1_000_000},
                "lr": {"type": ["number", "null"], "exclusiveMinimum": 0},
                "max_train_samples": {"type": ["integer", "null"], "minimum": 0},
                "nproc": {"type": "integer", "minimum": 1, "maximum": 64},
                "compile": {"enum": ["off", "on", "graphs"]},
                "channels_last": {"type": "boolean"},
                "model_options": MODEL_OPTIONS,
                # What resuming a run builds its TrainConfig from (models/training/session.py), so typed here too.
                "dataset": {"type": "string", "minLength": 1},
                "model": {"type": "string", "minLength": 1},
                "optimizer": {"type": ["string", "null"]},
                "schedule": {"type": ["string", "null"]},
                "augment": {"type": ["string", "null"]},
                "weight_decay": {"type": ["number", "null"], "minimum": 0},
                "label_smoothing": {"type": ["number", "null"], "minimum": 0, "exclusiveMaximum": 1},
                "momentum": {"type": "number", "minimum": 0, "exclusiveMaximum": 1},
                "device": {"type": "string"},
                "seed": {"type": "integer", "minimum": 0, "maximum": 2**32 - 1},
                "val_fraction": {"type": "number", "minimum": 0, "exclusiveMaximum": 0.9},
                "label_noise": {"type": "number", "minimum": 0, "exclusiveMaximum": 0.5},
                "amp": {"type": "boolean"},
                "workers": {"type": "integer", "minimum": 0, "maximum": 64},
            },
        },
        "device": {"type": "string"},
        "memory_format": {"enum": ["channels_last", "contiguous"]},
        # Several processes trained the run (DistributedDataParallel; absent: one process).
        "distributed": {
            "type": "object",
            "required": ["world_size"],
            "properties": {
                "world_size": {"type": "integer", "minimum": 1, "maximum": 1_000_000},
                "backend": {"enum": ["gloo", "nccl", None]},
            },
        },
        "lr": {"type": ["number", "null"]},
        "recipe": {"type": ["object", "null"]},
    },
}

SUMMARY = {
    "type": "object",
    "properties": {
        "state": {"type": "string"},
        "interrupted_at": {"type": "string"},  # when its writer was found gone (ISO 8601; runs/tidy.py)
        "compiled": {"type": "string"},  # what the steps ran as (--compile), or why they fell back to eager
        "error": {"type": ["string", "null"]},
        "epochs_done": {**_count, "maximum": MAX_EPOCHS},
        "epochs": {"type": ["integer", "null"], "minimum": 0, "maximum": MAX_EPOCHS},
        "partial_steps": _count,
        "steps_per_epoch": _count,
        "kept": {"type": ["string", "null"]},
        "val_acc": _fraction,
        "test_acc": _fraction,
        "val_loss": {"type": ["number", "null"]},
        "test_loss": {"type": ["number", "null"]},
        # a number to predict: R² (at most 1, unbounded below), and the errors in the target's units
        "val_r2": {"type": ["number", "null"], "maximum": 1},
        "test_r2": {"type": ["number", "null"], "maximum": 1},
        "test_rmse": {"type": ["number", "null"], "minimum": 0},
        "test_mae": {"type": ["number", "null"], "minimum": 0},
        # a forecast: the naive and seasonal-naive forecasts' errors on the same test windows, its own per step ahead
        **{
            f"test_{b}_{m}": {"type": ["number", "null"], "minimum": 0}
            for b in ("naive", "seasonal_naive")
            for m in ("mae", "rmse")
        },
        "test_mae_by_step": {"type": "array", "items": {"type": "number", "minimum": 0}, "maxItems": MAX_SIDE},
        "test_rmse_by_step": {"type": "array", "items": {"type": "number", "minimum": 0}, "maxItems": MAX_SIDE},
        "confusion": {"type": ["array", "null"], "maxItems": MAX_CLASSES},
        "confusion_file": {"enum": ["confusion.npy", None]},  # a large matrix, beside the summary (runstore)
        # a scene model (models/scenes): named metrics (map, map_50, miou, ap/<class>, ...) and the one it is judged by
        "val_metrics": {"type": ["object", "null"], "additionalProperties": {"type": "number"}},
        "test_metrics": {"type": ["object", "null"], "additionalProperties": {"type": "number"}},
        "headline": {"type": "string"},
    },
}

# vocab.json of a text model trained here (xaidash.data.tokenizer.WordVocab).
VOCAB = {
    "type": "object",
    "required": ["itos"],
    "properties": {
        "kind": {"const": "word"},
        "itos": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": MAX_VOCAB},
        "max_length": {"type": "integer", "minimum": 1, "maximum": 100_000},
    },
}

TRAIN_STATE = {
    "type": "object",
    "properties": {
        "epoch": {"type": "integer", "minimum": 0, "maximum": MAX_EPOCHS},
        "step": {"type": "integer", "minimum": 0},
        "partial_steps": _count,
    },
}


def check(document: Any, schema: dict[str, Any], path: Path) -> None:
    """ModelError naming the run's file and the first field that breaks the schema (the most relevant one):
    'RUN/config.json is damaged: train.epochs: -3 is less than the minimum of 1.'"""
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(document))
    if error is None:
        return
    where = ".".join(str(p) for p in error.absolute_path)
    if error.validator == "required":
        missing = next((k for k in error.validator_value if k not in error.instance), "?")
        what = f"{where + '.' if where else ''}{missing} is missing"
    else:
        message = error.message if len(error.message) <= 120 else error.message[:117] + "..."
        what = f"{where or 'the whole file'}: {message}"
    raise ModelError(f"{path.parent.name}/{path.name} is damaged: {what}.")
