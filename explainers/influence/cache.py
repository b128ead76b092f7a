"""The training samples' features per snapshot, computed once per run and reused by every query and the whole-set
job: one safetensors file per snapshot and chunk of samples under `<run>/influence/<method>/<snapshot>/`, written
atomically (a killed job leaves whole chunks only), so memory stays about one chunk whatever the training set's size.

`manifest.json` beside them holds the fingerprint the files were computed for (the snapshots' files, their
weights, the training samples and labels, the method's settings); any change and the method's folder is started
afresh (flags.json, one level up, is never touched)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from xaidash.data.atomic import atomic_write, atomic_write_json
from xaidash.explainers.influence.layer import final_linear
from xaidash.explainers.influence.registry import InfluenceMethodSpec, Snapshot
from xaidash.explainers.influence.training_set import TrainingData
from xaidash.explainers.params import ExplainError
from xaidash.models.bundle import ModelBundle
from xaidash.models.device import pick_device
from xaidash.models.registry import ModelError
from xaidash.models.runs.store import WEIGHTS, Run, load_bundle

CACHE_VERSION = 2
MANIFEST = "manifest.json"
_OPEN = threading.Lock()  # two threads of one server (a query and the whole-set job) check the fingerprint in turn


def method_dir(run: Run, method: str) -> Path:
    return run.path / "influence" / method


class FeatureCache:
    """The cached features of `data` for method `spec` on `run`; models are loaded on first use and held."""

    def __init__(
        self,
        run: Run,
        spec: InfluenceMethodSpec,
        data: TrainingData,
        device: str | torch.device = "auto",
        bundle: ModelBundle | None = None,
    ):
        self.run, self.spec, self.data, self.scorer = run, spec, data, spec.scorer
        self.device = device if isinstance(device, torch.device) else pick_device(device)
        self.snapshots, self.notes = self.scorer.snapshots(run)
        if not self.snapshots:
            raise ExplainError(f"Run {run.id} has no weights for {spec.label} to read.")
        self.root = method_dir(run, spec.id)
        self._bundle = bundle if bundle is not None and bundle.device == self.device else None
        self._models: dict[str, nn.Module] = {}
        self.layer_name = ""
        self._final_same: bool | None = None
        self._nhwc = bool(getattr(self.scorer, "channels_last", False))
        self._nhwc_inputs = False  # set once a model was converted (a model without convolutions keeps NCHW)
        self.fresh = self._open()

    # ---- the fingerprint ---------------------------------------------------------------------------------------
    def fingerprint(self) -> dict[str, Any]:
        s = self.data.samples
        digest = hashlib.sha256(s.indices.numpy().tobytes() + s.labels.numpy().tobytes()).hexdigest()[:16]
        snaps = []
        for snap in self.snapshots:
            st = snap.path.stat()
            snaps.append([snap.tag, st.st_size, st.st_mtime_ns, round(snap.weight, 12)])
        return {
            "version": CACHE_VERSION,
            "method": self.spec.id,
            "samples": len(self.data),
            "samples_digest": digest,
            "chunk_size": self.scorer.chunk_size,
            "settings": self.scorer.settings(),
            "snapshots": snaps,
        }

    def _open(self) -> bool:
        """Start the folder afresh when what it was computed for changed; True when it was (re)started."""
        want = json.loads(json.dumps(self.fingerprint()))
        path = self.root / MANIFEST
        with _OPEN:
            try:
                have = json.loads(path.read_text()) if path.exists() else None
            except (OSError, ValueError):
                have = None
            if have == want:
                return False
            try:
                if self.root.exists():
                    shutil.rmtree(self.root)
                atomic_write_json(path, want)
            except OSError as e:
                raise ExplainError(f"Cannot write the influence cache under {self.root}: {e.strerror or e}.") from None
            return True

    # ---- models -------------------------------------------------------------------------------------------------
    @property
    def bundle(self) -> ModelBundle:
        """The final model (inputs are prepared through it; the shown predictions are its)."""
        if self._bundle is None:
            self._bundle = self._load(None)
        return self._bundle

    def _load(self, epoch: int | None) -> ModelBundle:
        try:
            return load_bundle(self.run, device=str(self.device), epoch=epoch)
        except ModelError as e:
            raise ExplainError(str(e)) from None

    def layer(self) -> str:
        if not self.layer_name:
            self.layer_name = final_linear(self.bundle, self.data.inputs(self.bundle, 0, min(2, len(self.data))))
        return self.layer_name

    def model(self, snap: Snapshot) -> tuple[nn.Module, nn.Linear]:
        name = self.layer()
        if snap.tag not in self._models:
            model = self._load(snap.epoch).model  # its own copy: the caller's model is never changed
            if self._nhwc and any(isinstance(m, nn.Conv2d) for m in model.modules()):
                # NHWC: about 5x faster convolutions on CPUs (oneDNN), the same numbers to float rounding
                model = model.to(memory_format=torch.channels_last)
                self._nhwc_inputs = True
            self._models[snap.tag] = model
        model = self._models[snap.tag]
        layer = model.get_submodule(name)
        assert isinstance(layer, nn.Linear)
        return model, layer

    def _layout(self, x: torch.Tensor) -> torch.Tensor:
        """Images in the channels-last layout of the cache's convolution models, when model() converts them."""
        return x.contiguous(memory_format=torch.channels_last) if self._nhwc_inputs and x.dim() == 4 else x

    # ---- features -------------------------------------------------------------------------------------------------
    def chunks(self) -> list[tuple[int, int]]:
        n, size = len(self.data), self.scorer.chunk_size
        return [(s, min(s + size, n)) for s in range(0, n, size)]

    def chunk_path(self, snap: Snapshot, start: int, stop: int) -> Path:
        return self.root / snap.tag / f"{start}-{stop}.safetensors"

    def features(self, snap: Snapshot, start: int, stop: int) -> dict[str, torch.Tensor]:
        """The features of training positions start..stop-1 under `snap`: read, or computed and written."""
        path = self.chunk_path(snap, start, stop)
        if path.exists():
            try:
                return load_file(str(path), device=str(self.device))
            except Exception:  # noqa: BLE001 - a damaged chunk is computed again
                pass
        model, layer = self.model(snap)
        x = self._layout(self.data.inputs(self.bundle, start, stop))
        feats = self.scorer.features(model, layer, x, self.data.labels(start, stop).to(self.device))
        tensors = {k: v.detach().float().cpu().contiguous() for k, v in feats.items()}
        with contextlib.suppress(OSError):  # a read-only run folder: still answered, only not cached
            atomic_write(path, lambda tmp: save_file(tensors, str(tmp)))
        return {k: v.to(self.device) for k, v in tensors.items()}

    def query(self, snap: Snapshot, x: torch.Tensor, target: int) -> dict[str, torch.Tensor]:
        model, layer = self.model(snap)
        label = torch.full((len(x),), int(target), dtype=torch.long, device=self.device)
        return {k: v.detach().float() for k, v in self.scorer.features(model, layer, self._layout(x), label).items()}

    def query_scores(
        self, x: torch.Tensor, target: int, progress: Callable[[float, str], None] | None = None
    ) -> torch.Tensor:
        """(n,) each training sample's score for the one prepared input `x` and class `target`."""
        queries = {snap.tag: self.query(snap, x, target) for snap in self.snapshots}
        chunks = self.chunks()
        out = torch.zeros(len(self.data), dtype=torch.float64)
        for i, (start, stop) in enumerate(chunks):
            total = torch.zeros(stop - start, dtype=torch.float64, device=self.device)
            for snap in self.snapshots:
                feats = self.features(snap, start, stop)
                total += snap.weight * self.scorer.score(queries[snap.tag], feats).double()
            out[start:stop] = total.cpu()
            if progress is not None:
                progress((i + 1) / len(chunks), f"training samples {stop:,} of {len(self.data):,}")
        return out

    def final_probabilities(self, start: int, stop: int) -> torch.Tensor:
        """(stop - start, classes) the final model's probabilities of these training positions: from the cached
        features when the last snapshot holds the final weights and its features carry them (no extra pass)."""
        last = self.snapshots[-1]
        if self._last_is_final():
            feats = self.features(last, start, stop)
            if "probs" in feats:
                return feats["probs"].cpu()
        bundle = self.bundle
        with torch.no_grad():
            return torch.softmax(bundle.logits(self.data.inputs(bundle, start, stop)), dim=1).cpu()

    def _last_is_final(self) -> bool:
        if self._final_same is None:
            last, final = self.snapshots[-1].path, self.run.file(WEIGHTS)
            self._final_same = last == final
            if not self._final_same and final.exists():
                a, b = load_file(str(last)), load_file(str(final))
                self._final_same = a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
        return self._final_same

    def self_scores(self, start: int, stop: int) -> torch.Tensor | None:
        """(stop - start,) self-influence of these training positions, summed over the snapshots."""
        total = torch.zeros(stop - start, dtype=torch.float64, device=self.device)
        for snap in self.snapshots:
            part = self.scorer.self_score(self.features(snap, start, stop))
            if part is None:
                return None
            total += snap.weight * part.double()
        return total.cpu()
