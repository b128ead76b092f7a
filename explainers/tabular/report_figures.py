"""Every figure of a global report as PNG bytes by file name: what `xaidash global --out` writes."""

from __future__ import annotations

import re

from xaidash.explainers.tabular.api import GlobalReport
from xaidash.explainers.tabular.figures import ice_png, importance_png, pair_png
from xaidash.explainers.tabular.shap_figures import shap_bars_png, shap_dependence_png
from xaidash.explainers.tabular.tree_figure import surrogate_png


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "column"


class _Names:
    """File names from column names, unique even when two names differ only in characters a file name drops."""

    def __init__(self) -> None:
        self.used: set[str] = set()

    def __call__(self, stem: str) -> str:
        name, k = f"{stem}.png", 2
        while name in self.used:
            name, k = f"{stem}_{k}.png", k + 1
        self.used.add(name)
        return name


def figure_files(report: GlobalReport) -> dict[str, bytes]:
    """File name -> PNG bytes: the importances, each column's ICE (plain and centred), the pair's map, the surrogate
    tree, and global SHAP's bars and dependence plots when the report has them."""
    name = _Names()
    files = {name("importance"): importance_png(report.importance)}
    for result in report.dependence:
        files[name(f"ice_{_slug(result.column)}")] = ice_png(result)
        files[name(f"ice_centred_{_slug(result.column)}")] = ice_png(result, centred=True)
    if report.pair is not None:
        files[name(f"pdp_{_slug(report.pair.columns[0])}_{_slug(report.pair.columns[1])}")] = pair_png(report.pair)
    files[name("surrogate_tree")] = surrogate_png(report.surrogate, report.classes)
    if report.shap is not None:
        files[name("shap_mean_abs")] = shap_bars_png(report.shap)
        for d in report.shap.dependence:
            files[name(f"shap_dependence_{_slug(d.column)}")] = shap_dependence_png(report.shap, d)
    return files
