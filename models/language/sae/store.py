"""SAEs kept under their language model's run: `<run>/saes/<sae_id>/` holds

- `config.json`: the SaeConfig (`config`), `d_in`, `status` (running | stopped | finished | failed), `error`, the
  SAELens inference config (`saelens`), the measured `rates`, the training process's `pid`;
- `sae.safetensors`: the inference SAE's weights under SAELens's names (W_enc (d_in, width), b_enc, W_dec
  (width, d_in), b_dec, threshold for jumprelu);
- `metrics.json`: the held-out evaluation; `events.jsonl`: one line per training step;
- `tokens.safetensors`: the corpus contexts (`tokens` (n_contexts, context) int32, `heldout` (n_contexts,) bool);
- `activations/<split>-NNNNN.safetensors`: harvested chunks (`activations` (n, d_in) float16, or float32 where
  float16 would overflow; `index` (n,) int64 = context * context_len + position);
- `state/` while a training is stopped: what resuming needs (train.py)."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from xaidash.data.atomic import atomic_write, atomic_write_json
from xaidash.models.language.sae.config import Rates, SaeConfig
from xaidash.models.registry import ModelError
from xaidash.models.runs.store import Run

SAES = "saes"
CONFIG = "config.json"
WEIGHTS = "sae.safetensors"
METRICS = "metrics.json"
EVENTS = "events.jsonl"
TOKENS = "tokens.safetensors"
ACTIVATIONS = "activations"
SPLITS = ("train", "heldout")
STATUSES = ("running", "stopped", "finished", "failed")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,120}$")


@dataclass(frozen=True)
class SaeRecord:
    """One SAE of a run as its files say: `status` is "running" only while its training process lives (a
    training that died is "stopped" when it left a resumable state, else "failed")."""

    id: str
    config: SaeConfig
    status: str
    metrics: dict[str, Any] | None
    d_in: int
    folder: Path
    error: str = ""
    created: str = ""

    @property
    def label(self) -> str:
        c = self.config
        sparsity = f"k {c.k}" if c.architecture == "topk" else f"coef {c.sparsity:g}"
        return f"{self.id}: layer {c.layer} {c.site}, {c.architecture} width {c.width:,} {sparsity} ({self.status})"


def _path(run: Run | str | Path) -> Path:
    return run.path if isinstance(run, Run) else Path(run)


def saes_root(run: Run | str | Path) -> Path:
    return _path(run) / SAES


def sae_folder(run: Run | str | Path, sae_id: str) -> Path:
    """The folder of SAE `sae_id` under `run` (which need not exist yet); a ModelError for an id that is no
    plain folder name."""
    if not isinstance(sae_id, str) or not _ID.match(sae_id):
        raise ModelError(f"{sae_id!r} is not an SAE id (letters, digits, '.', '_' and '-').")
    return saes_root(run) / sae_id


def _alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def write_config(folder: Path, config: SaeConfig, d_in: int, status: str, **extra: Any) -> None:
    """(Re)write config.json, keeping what earlier writes put there that `extra` does not replace."""
    old = _read_json(folder / CONFIG) or {}
    doc = {**old, "config": config.to_json(), "d_in": int(d_in), "status": status, **extra}
    atomic_write_json(folder / CONFIG, doc)


def update_config(folder: Path, **fields: Any) -> dict[str, Any]:
    doc = {**(_read_json(folder / CONFIG) or {}), **fields}
    atomic_write_json(folder / CONFIG, doc)
    return doc


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def has_state(folder: Path) -> bool:
    return (folder / "state" / "state.json").is_file()


def _status(doc: dict[str, Any], folder: Path) -> str:
    status = str(doc.get("status", "failed"))
    if status == "running" and not _alive(doc.get("pid")):
        return "stopped" if has_state(folder) else "failed"
    return status if status in STATUSES else "failed"


def read_record(run: Run | str | Path, sae_id: str) -> SaeRecord:
    """The record of one SAE; a ModelError naming the run's SAEs when there is none by that id."""
    folder = sae_folder(run, sae_id)
    doc = _read_json(folder / CONFIG)
    if not isinstance(doc, dict) or "config" not in doc:
        known = ", ".join(r.id for r in list_saes(run)) or "none yet"
        raise ModelError(f"Run {_path(run).name} has no SAE {sae_id!r} (its SAEs: {known}).")
    try:
        config = SaeConfig.from_json(doc["config"])
    except TypeError as e:
        raise ModelError(f"SAE {sae_id}: its config.json cannot be read ({e}).") from None
    metrics = _read_json(folder / METRICS)
    return SaeRecord(
        id=sae_id,
        config=config,
        status=_status(doc, folder),
        metrics=metrics if isinstance(metrics, dict) else None,
        d_in=int(doc.get("d_in", 0)),
        folder=folder,
        error=str(doc.get("error", "")),
        created=str(doc.get("created", "")),
    )


def list_saes(run: Run | str | Path) -> list[SaeRecord]:
    """The run's SAEs, oldest first (ids begin with their creation time)."""
    root = saes_root(run)
    if not root.is_dir():
        return []
    out = []
    for folder in sorted(root.iterdir()):
        if folder.is_dir() and _ID.match(folder.name) and (folder / CONFIG).is_file():
            try:
                out.append(read_record(run, folder.name))
            except ModelError:
                continue
    return out


@dataclass
class LoadedSae:
    """A trained SAE ready to apply: `sae` is SAELens's inference SAE (`encode`, `decode`, `W_enc`, `W_dec`,
    `b_dec`), in eval mode on the device asked for."""

    record: SaeRecord
    sae: Any

    @property
    def layer(self) -> int:
        return self.record.config.layer

    @property
    def site(self) -> str:
        return self.record.config.site

    @property
    def width(self) -> int:
        return self.record.config.width

    @property
    def d_in(self) -> int:
        return self.record.d_in

    @property
    def id(self) -> str:
        return self.record.id


def build_inference_sae(saelens_cfg: dict[str, Any], weights: dict[str, torch.Tensor], device: str) -> Any:
    """SAELens's inference SAE for a config dict and its state dict."""
    from xaidash.models.language.sae.lens import sae_lens

    sae = sae_lens().SAE.from_dict({**saelens_cfg, "device": "cpu"})
    sae.load_state_dict(weights)
    return sae.to(device).eval()


def load_sae(run: Run | str | Path, sae_id: str, device: str = "cpu") -> LoadedSae:
    """The SAE `sae_id` of `run` (a finished one, or the weights a stopped one had when it stopped)."""
    record = read_record(run, sae_id)
    doc = _read_json(record.folder / CONFIG) or {}
    path = record.folder / WEIGHTS
    if not path.is_file() or "saelens" not in doc:
        raise ModelError(f"SAE {sae_id} has no weights yet ({record.status}): train it to the end or resume it.")
    try:
        weights = load_file(str(path))
        sae = build_inference_sae(doc["saelens"], weights, device)
    except (OSError, RuntimeError, ValueError, KeyError) as e:
        raise ModelError(f"SAE {sae_id}: its weights cannot be loaded ({e}).") from None
    return LoadedSae(record=record, sae=sae)


def write_weights(folder: Path, weights: dict[str, torch.Tensor], saelens_cfg: dict[str, Any]) -> None:
    tensors = {k: v.detach().to("cpu", torch.float32).contiguous() for k, v in weights.items()}
    atomic_write(folder / WEIGHTS, lambda p: save_file(tensors, str(p)))
    update_config(folder, saelens=saelens_cfg)


def measured_rates(run: Run | str | Path) -> Rates | None:
    """The throughputs the run's newest finished SAE measured on this machine (None before the first): the
    expected time of the next one (config.expected_seconds)."""
    for record in reversed(list_saes(run)):
        rates = (_read_json(record.folder / CONFIG) or {}).get("rates") or {}
        if record.status == "finished" and rates.get("layer_tokens_s") and rates.get("train_macs_s"):
            return Rates(layer_tokens_s=float(rates["layer_tokens_s"]), train_macs_s=float(rates["train_macs_s"]))
    return None


# ---- the corpus and the harvested activations -------------------------------------------------------------------


def write_tokens(folder: Path, tokens: torch.Tensor, heldout: torch.Tensor) -> None:
    data = {"tokens": tokens.to(torch.int32).contiguous(), "heldout": heldout.to(torch.bool).contiguous()}
    atomic_write(folder / TOKENS, lambda p: save_file(data, str(p)))


def corpus_tokens(run: Run | str | Path, sae_id: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The SAE's corpus contexts: token ids (n_contexts, context) int64 and which are held out (n_contexts,)
    bool. The flat index of an activation is context * context_len + position into these."""
    path = sae_folder(run, sae_id) / TOKENS
    if not path.is_file():
        raise ModelError(f"SAE {sae_id} has no harvested corpus (its training stopped before harvesting).")
    data = load_file(str(path))
    return data["tokens"].to(torch.int64), data["heldout"].to(torch.bool)


def chunk_path(folder: Path, split: str, i: int) -> Path:
    return folder / ACTIVATIONS / f"{split}-{i:05d}.safetensors"


def write_chunk(folder: Path, split: str, i: int, acts: torch.Tensor, index: torch.Tensor) -> None:
    """Activations kept as float16 (half the disk) unless a value would overflow it."""
    acts = acts.detach().to("cpu", torch.float32)
    half = acts.to(torch.float16)
    keep = half if bool(torch.isfinite(half).all()) else acts
    data = {"activations": keep.contiguous(), "index": index.to(torch.int64).contiguous()}
    atomic_write(chunk_path(folder, split, i), lambda p: save_file(data, str(p)))


def chunk_files(folder: Path, split: str) -> list[Path]:
    return sorted((folder / ACTIVATIONS).glob(f"{split}-[0-9][0-9][0-9][0-9][0-9].safetensors"))


def read_chunk(path: Path) -> tuple[torch.Tensor, torch.Tensor]:
    data = load_file(str(path))
    return data["activations"].to(torch.float32), data["index"].to(torch.int64)


def activation_chunks(
    run: Run | str | Path, sae_id: str, split: str = "train"
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """The harvested activations of `split` ("train" or "heldout"), chunk by chunk: (n, d_in) float32 and each
    row's flat index into `corpus_tokens`' tokens (context * context_len + position)."""
    if split not in SPLITS:
        raise ModelError(f"Unknown split {split!r}: choose one of {', '.join(SPLITS)}.")
    folder = sae_folder(run, sae_id)
    files = chunk_files(folder, split)
    if not files:
        raise ModelError(f"SAE {sae_id} has no harvested {split} activations.")
    for path in files:
        yield read_chunk(path)


def remove_sae(run: Run | str | Path, sae_id: str) -> None:
    folder = sae_folder(run, sae_id)
    if folder.is_dir():
        shutil.rmtree(folder)
