"""Text LIME and KernelSHAP speed: xaidash's batched device path against the libraries' per-input calls.

For each model and method, on the same N `cues` test sentences (generated, offline; 8-16 words) and the
same number of samples, it times
- xaidash: one `explain(bundle, texts, targets, method, samples=S)` call for all N texts (perturbations
  built as id rows on the device, all texts' rows sharing one stream of model passes);
- reference: the per-input library call that text LIME and KernelSHAP made before, once per text:
  lime's `LimeTextExplainer(bow=False, mask_string="").explain_instance(text, classifier, num_samples=S)`
  with the bundle's `predict_proba` as the classifier (perturbed strings, re-tokenized, `--batch-size`
  rows per pass), and captum's `KernelShap(proba).attribute(ids, n_samples=S,
  perturbations_per_eval=--batch-size)` (`explainers/methods/text_reference.py`);
and prints the time per text, the ratio reference / xaidash, how alike the two results are (mean
Spearman over texts for LIME, mean Pearson for KernelSHAP: independent draws, so sampling noise, not
zero), and as the last line per method:

    LIME (text_cnn, 500 samples) 32 texts: xaidash 0.412 s, reference 0.874 s, ratio 2.1x

Models have random weights (the cost does not depend on them): text_cnn and text_transformer with a
word vocabulary of the cues training split, minilm (pretrained, `--models minilm`) with its own WordPiece
tokenizer. Every path runs once to warm up, then the best of `--repeats` is kept; CUDA is synchronised.

    python bench/text_explain_speed.py                             # text_cnn, text_transformer; 32 texts
    python bench/text_explain_speed.py --models minilm --texts 8 --device auto
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import numpy as np
import torch

from xaidash.models.device import best_time, device_label, pick_device

MODELS = ("text_cnn", "text_transformer", "minilm")
METHODS = {"lime": "LIME", "shap_kernel": "KernelSHAP"}


@dataclass
class Row:
    model: str
    method: str
    samples: int
    texts: int
    xaidash_s: float  # all texts, one call
    reference_s: float  # all texts, one library call each
    batch: int  # rows per pass xaidash ran
    agreement: float  # mean Spearman (LIME) or Pearson (KernelSHAP) against the reference, per text

    @property
    def ratio(self) -> float:
        return self.reference_s / self.xaidash_s

    def last_line(self) -> str:
        return (
            f"{METHODS[self.method]} ({self.model}, {self.samples} samples) {self.texts} texts: "
            f"xaidash {self.xaidash_s:.3f} s, reference {self.reference_s:.3f} s, ratio {self.ratio:.1f}x"
        )


@dataclass
class Report:
    header: dict[str, Any]
    rows: list[Row] = field(default_factory=list)


def cues_texts(split: Literal["train", "test"]) -> list[str]:
    """The sentences of a `cues` split (generated, offline)."""
    from xaidash.data.registry import TextSplit, load_split

    data = load_split("cues", split)
    if not isinstance(data, TextSplit):
        raise SystemExit("The cues split did not load as texts.")
    return list(data.texts)


def make_bundle(name: str, device: torch.device):
    """A bundle of `name` with random weights (minilm: its pretrained encoder) on `device`."""
    from xaidash.data.registry import get_info
    from xaidash.data.tokenizer import WordVocab
    from xaidash.models import ModelBundle, build_model, get_spec

    info, spec = get_info("cues"), get_spec(name)
    torch.manual_seed(0)
    if spec.tokenizer is not None:
        tokenizer, model = spec.tokenizer(), build_model(name, info)
    else:
        tokenizer = WordVocab.build(cues_texts("train"))
        model = build_model(name, info, vocab_size=len(tokenizer), pad_id=tokenizer.pad_id)
    return ModelBundle(model.to(device).eval(), spec, info, device, tokenizer=tokenizer)


def agreement(method: str, ours: Sequence[np.ndarray], refs: Sequence[np.ndarray]) -> float:
    from scipy.stats import pearsonr, spearmanr

    corr = spearmanr if method == "lime" else pearsonr
    values = [float(corr(a, b)[0]) for a, b in zip(ours, refs, strict=True) if len(a) > 2]
    return float(np.nanmean(values)) if values else float("nan")


def bench(bundle, method: str, raw: list[str], samples: int, args: argparse.Namespace) -> Row:
    from xaidash.explainers import explain
    from xaidash.explainers.methods.text_reference import kernel_shap_text_reference, lime_text_reference

    device = bundle.device
    targets = explain(bundle, raw, method="saliency").targets.tolist()  # the predicted classes, fixed for both
    reference = lime_text_reference if method == "lime" else kernel_shap_text_reference
    out: dict[str, Any] = {}

    def ours() -> None:
        out["ours"] = explain(bundle, raw, targets, method, batch_size=args.batch_size, samples=samples)

    def library() -> None:
        out["refs"] = [
            reference(bundle, text, t, samples, seed=1, batch_size=args.batch_size)
            for text, t in zip(raw, targets, strict=True)
        ]

    xaidash_s = best_time(ours, device, args.repeats)
    reference_s = best_time(library, device, args.repeats)
    e = out["ours"]
    return Row(
        bundle.spec.name,
        method,
        samples,
        len(raw),
        xaidash_s,
        reference_s,
        int(e.diagnostics["batch_size"][0]),
        agreement(method, e.attributions, out["refs"]),
    )


def header(device: torch.device, args: argparse.Namespace) -> dict[str, Any]:
    where = device_label(device)
    return {
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        "device": where,
        "torch": torch.__version__,
        "texts": args.texts,
        "batch_size": args.batch_size,
        "repeats": args.repeats,
    }


def print_row(row: Row) -> None:
    per = 1000 / row.texts
    print(
        f"  {METHODS[row.method]:<11} {row.samples:>7}  {row.batch:>5}  {row.xaidash_s * per:>10.1f} ms"
        f"  {row.reference_s * per:>12.1f} ms  {row.ratio:>5.1f}x  {row.agreement:>9.3f}"
    )
    print(row.last_line())


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="text_cnn,text_transformer", help=f"comma-separated, of {', '.join(MODELS)}")
    p.add_argument("--methods", default="lime,shap_kernel", help="comma-separated, of lime, shap_kernel")
    p.add_argument("--texts", type=int, default=32, help="texts explained in one call")
    p.add_argument("--lime-samples", type=int, default=500, help="LIME's default")
    p.add_argument("--shap-samples", type=int, default=200, help="KernelSHAP's default")
    p.add_argument("--batch-size", type=int, default=256, help="explain()'s default; also the references' batch")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = p.parse_args(argv)
    for what, given, known in (("models", args.models, MODELS), ("methods", args.methods, tuple(METHODS))):
        unknown = [m for m in given.split(",") if m not in known]
        if unknown:
            raise SystemExit(f"Unknown {what}: {', '.join(unknown)}; choose from {', '.join(known)}.")
    return args


def main(argv: Sequence[str] | None = None) -> Report:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    report = Report(header(device, args))
    print(" | ".join(f"{k} {v}" for k, v in report.header.items()))
    raw = cues_texts("test")[: args.texts]
    for model in args.models.split(","):
        bundle = make_bundle(model, device)
        words = sorted(len(t.split()) for t in raw)
        print(f"\n{model}, {len(raw)} texts of {words[0]}-{words[-1]} words")
        print(
            f"  {'method':<11} {'samples':>7}  {'batch':>5}  {'xaidash/text':>13}  {'reference/text':>15}  ratio  agreement"
        )
        for method in args.methods.split(","):
            samples = args.lime_samples if method == "lime" else args.shap_samples
            row = bench(bundle, method, raw, samples, args)
            report.rows.append(row)
            print_row(row)
    return report


if __name__ == "__main__":
    main()
