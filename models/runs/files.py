"""The names of a run folder's files (models/runs/store.py describes each), shared by the store and the lock: the
lock removes what an interrupted write of the run's writer left, and only that."""

from __future__ import annotations

CONFIG, METRICS, SUMMARY, WEIGHTS, STATE, VOCAB, CONFUSION = (
    "config.json",
    "metrics.jsonl",
    "summary.json",
    "model.safetensors",
    "train_state.safetensors",
    "vocab.json",
    "confusion.npy",
)
CHECKPOINTS = "checkpoints"  # checkpoints/epoch_NNN.safetensors
# What the run's writer (the process holding its lock) writes; other writers (calibration, caches) write other names.
WRITER_FILES = (CONFIG, METRICS, SUMMARY, WEIGHTS, STATE, VOCAB, CONFUSION)
