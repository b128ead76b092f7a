"""Table LIME and KernelSHAP speed: xaidash's batched path against the libraries' per-row calls.

On N `planted` test rows (generated, offline) and a `tabular_mlp` with random weights (the cost does not depend on
them), for each method it times
- xaidash: one `explain(bundle, rows, method=..., samples=S)` call for all N rows (LIME: lime's sampler per row,
  every row's samples scored in one stream of batched passes; KernelSHAP: every coalition of every row and
  background row built on the device and scored in shared passes);
- reference: the library call per row: lime's `LimeTabularExplainer.explain_instance` with the bundle's
  `predict_proba` as its classifier_fn (`methods/table_lime.lime_table_reference`), and shap's
  `KernelExplainer(f, background).shap_values(row, nsamples=S)` on the same background rows;
and prints the time per row, the ratio reference / xaidash, how alike the results are (LIME: the largest
|difference|, 0 when equal, as the same seed gives the same samples; KernelSHAP: the mean Pearson correlation with
shap's values, independent draws), and as the last line per method:

    LIME (tabular_mlp, 1000 samples) 100 rows: xaidash 3.1 s, reference 4.2 s, ratio 1.4x

Every path runs once to warm up, then the best of `--repeats` is kept; CUDA is synchronised.

    python bench/table_explain_speed.py                    # 100 rows, LIME 1000 samples, KernelSHAP 400
    python bench/table_explain_speed.py --rows 20 --device cuda
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from xaidash.models.device import best_time, device_label, pick_device

METHODS = {"lime": "LIME", "shap_kernel": "KernelSHAP"}
BACKGROUND = 20


@dataclass
class Row:
    method: str
    samples: int
    rows: int
    xaidash_s: float
    reference_s: float
    agreement: float

    @property
    def ratio(self) -> float:
        return self.reference_s / self.xaidash_s

    def last_line(self) -> str:
        return (
            f"{METHODS[self.method]} (tabular_mlp, {self.samples} samples) {self.rows} rows: "
            f"xaidash {self.xaidash_s:.3g} s, reference {self.reference_s:.3g} s, ratio {self.ratio:.1f}x"
        )


def _bundle(device: torch.device) -> Any:
    import xaidash.data.sets  # noqa: F401  (registers the data sets)
    from xaidash.data.registry import get_info
    from xaidash.models import ModelBundle, build_model, get_spec

    torch.manual_seed(0)
    info = get_info("planted")
    return ModelBundle(build_model("tabular_mlp", info).eval().to(device), get_spec("tabular_mlp"), info, device)


def _timed(fn: Callable[[], Any], repeats: int, device: torch.device) -> tuple[float, Any]:
    out = fn()  # the warm-up, its result kept
    return best_time(fn, device, repeats, warmup=lambda: None), out


def _lime(bundle: Any, rows: torch.Tensor, samples: int, repeats: int, device: torch.device) -> Row:
    from xaidash.explainers import explain
    from xaidash.explainers.methods.table_lime import TRAINING_ROWS, lime_table_reference
    from xaidash.explainers.modalities.table_values import training_rows

    training = training_rows(bundle, TRAINING_ROWS, 0)
    assert training is not None
    ours_s, e = _timed(lambda: explain(bundle, rows, method="lime", samples=samples), repeats, device)
    train = training.double().numpy()

    def reference() -> list[np.ndarray]:
        return [lime_table_reference(bundle, r, int(t), samples, train) for r, t in zip(rows, e.targets, strict=True)]

    ref_s, ref = _timed(reference, repeats, device)
    gap = max(float(np.abs(e.item(i) - ref[i]).max()) for i in range(len(rows)))
    return Row("lime", samples, len(rows), ours_s, ref_s, gap)


def _shap(bundle: Any, rows: torch.Tensor, samples: int, repeats: int, device: torch.device) -> Row:
    import shap

    from xaidash.explainers import explain
    from xaidash.explainers.modalities.table_values import training_rows

    background = training_rows(bundle, BACKGROUND, 3)
    assert background is not None
    prepared = bundle.prepare(background)
    ours_s, e = _timed(
        lambda: explain(
            bundle, rows, method="shap_kernel", samples=samples, background=prepared, background_size=BACKGROUND
        ),
        repeats,
        device,
    )
    bg = background.double().numpy()

    def reference() -> list[np.ndarray]:
        out = []
        for r, t in zip(rows, e.targets, strict=True):

            def f(m: np.ndarray, t: int = int(t)) -> np.ndarray:
                return bundle.predict_proba(torch.as_tensor(m, dtype=torch.float32))[:, t].double().numpy()

            values = shap.KernelExplainer(f, bg).shap_values(r.double().numpy(), nsamples=samples, silent=True)
            out.append(np.asarray(values).reshape(-1))
        return out

    ref_s, ref = _timed(reference, repeats, device)
    pearson = float(np.mean([np.corrcoef(e.item(i), ref[i])[0, 1] for i in range(len(rows))]))
    return Row("shap_kernel", samples, len(rows), ours_s, ref_s, pearson)


def main(argv: Sequence[str] | None = None) -> list[Row]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=100)
    p.add_argument("--lime-samples", type=int, default=1000)
    p.add_argument("--shap-samples", type=int, default=400)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--device", default="auto")
    args = p.parse_args(argv)
    device = pick_device(args.device)
    bundle = _bundle(device)
    from xaidash.data.registry import TableSplit, load_split

    split = load_split("planted", "test")
    assert isinstance(split, TableSplit)
    rows = split.rows[: args.rows]
    print(f"device {device_label(device)}; {len(rows)} planted rows; tabular_mlp (random weights)")
    out = []
    for row in (
        _lime(bundle, rows, args.lime_samples, args.repeats, device),
        _shap(bundle, rows, args.shap_samples, args.repeats, device),
    ):
        agreement = "max |diff|" if row.method == "lime" else "mean Pearson"
        print(
            f"{METHODS[row.method]:11s} xaidash {row.xaidash_s / row.rows * 1e3:8.2f} ms/row  reference "
            f"{row.reference_s / row.rows * 1e3:8.2f} ms/row  {agreement} {row.agreement:.4f}"
        )
        print(row.last_line())
        out.append(row)
    return out


if __name__ == "__main__":
    main()
