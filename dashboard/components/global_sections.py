"""The Global view's readable parts: the surrogate tree (its fidelity in words, the tree drawn, its rules as an
indented list), the glassbox models beside the network, and the downloads (global.json as `xaidash global --out`
writes it, with its arrays and every figure, in one zip; or the JSON alone).

For a model that predicts a number (`GlobalReport.task` 'values') the surrogate is a regression tree whose fidelity is
its R² against the network's predictions (no rows 'agree' on a number) and whose leaves predict values in the target's
units, and the glassboxes are scored by test R², the network's gain over them in R² points (hundredths of R²)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict
from typing import TYPE_CHECKING

import pandas as pd
import streamlit as st

from xaidash.dashboard.components.global_tree import colour_key, tree_dot, value_key
from xaidash.data.formatting import percent
from xaidash.explainers.figures.jsonable import jsonable
from xaidash.explainers.figures.report_files import json_text, zip_bytes
from xaidash.explainers.figures.result_json import result_document
from xaidash.explainers.tabular.api import GlobalOptions, GlobalReport
from xaidash.explainers.tabular.cli import RESULT_JSON
from xaidash.explainers.tabular.glassbox import GlassboxComparison
from xaidash.explainers.tabular.surrogate import Surrogate, TreeNode

if TYPE_CHECKING:
    from streamlit.elements.lib.column_types import ColumnConfig

MAX_DRAWN_LEAVES = 16  # a wider tree is shown as its rules only (a drawing of 256 leaves cannot be read)
INDENT = "    "
SPEARMAN = "Spearman with the network's importances"


def fidelity_sentence(surrogate: Surrogate) -> str:
    """'The surrogate tree agrees with the network on 94% of held-out rows (376 of 400).', or for a regression tree
    'The surrogate tree reproduces the network's predictions with R² 0.87 on 89 held-out rows ...'."""
    if surrogate.kind == "values":
        return (
            f"The surrogate tree reproduces the network's predictions with {surrogate.fidelity_name} "
            f"{surrogate.fidelity:.2f} on {surrogate.held_out} held-out rows (1: exactly; 0: no better than their "
            "mean)."
        )
    return (
        f"The surrogate tree agrees with the network on {surrogate.fidelity:.0%} of held-out rows "
        f"({surrogate.agree} of {surrogate.held_out})."
    )


def _leaf_line(node: TreeNode) -> str:
    if node.value is not None:  # a regression tree's leaf: its value and how much the network varies under it
        return f"→ {node.predicted}   ({node.rows} training rows; the network's predictions there ± {node.spread or 0:.3g})"
    return f"→ {node.predicted}   ({node.rows} training rows, {node.purity:.0%} of them predicted so by the network)"


def _rule_lines(node: TreeNode, by_id: dict[int, TreeNode], depth: int) -> Iterator[str]:
    pad = INDENT * depth
    if node.yes is None or node.no is None:
        yield pad + _leaf_line(node)
        return
    for child in (by_id[node.yes], by_id[node.no]):
        yield f"{pad}if {child.condition}:"
        yield from _rule_lines(child, by_id, depth + 1)


def rules_text(surrogate: Surrogate) -> str:
    """The tree as nested if-lines, a leaf's class (or predicted value) after an arrow."""
    by_id = {n.id: n for n in surrogate.nodes}
    return "\n".join(_rule_lines(surrogate.nodes[0], by_id, 0))


def _fit_caption(report: GlobalReport) -> str:
    s = report.surrogate
    if s.kind == "values":
        return (
            f"A regression tree of depth {s.depth} fitted to the network's predicted {report.target} on the "
            f"{s.fitted_rows:,} training rows (not to the true values), so its rules describe the network, and only as "
            f"far as its R² says: the rest of the spread of the network's predictions the tree does not explain. On "
            f"the rows it was fitted to its R² is {s.train_fidelity:.2f}; against the true values of the held-out rows "
            f"its R² is {s.accuracy:.2f}."
        )
    return (
        f"A decision tree of depth {s.depth} fitted to the network's predicted classes on the {s.fitted_rows:,} "
        "training rows (not to the true labels), so its rules describe the network, and only as far as it agrees "
        f"with it: on {s.held_out - s.agree} held-out rows the network does something the tree does not say. On "
        f"the rows it was fitted to it agrees on {s.train_fidelity:.0%}; against the true labels it is right on "
        f"{s.accuracy:.0%} of held-out rows."
    )


def _drawing_caption(report: GlobalReport) -> str:
    s = report.surrogate
    if s.kind == "values":
        return (
            f"Read from the left. Each box: the column split on (or, at a leaf, the {report.target} the tree "
            "predicts: the mean of the network's predictions on its training rows), the training rows reaching it "
            "and ± the standard deviation of the network's predictions among them; each arrow: the condition on "
            f"that branch. Leaves are coloured by the value they predict ({value_key(s)})."
        )
    return (
        f"Read from the left. Each box: the column split on (or, at a leaf, the class the tree predicts and the "
        f"share of its rows the network puts in that class) and the training rows reaching it by the network's "
        f"class ({' / '.join(report.classes)}); each arrow: the condition on that branch. Leaves are coloured by "
        f"their class ({colour_key(report.classes)}), paler when their rows are more mixed."
    )


def surrogate_section(report: GlobalReport) -> None:
    s = report.surrogate
    st.markdown(f"**{fidelity_sentence(s)}**")
    st.caption(_fit_caption(report))
    leaves = sum(n.yes is None for n in s.nodes)
    if leaves <= MAX_DRAWN_LEAVES:
        st.graphviz_chart(tree_dot(s, report.classes), width="stretch")
        st.caption(_drawing_caption(report))
    else:
        st.caption(f"{leaves} leaves are too many to draw readably: its rules below.")
    with st.expander("The tree's rules, as text", expanded=leaves > MAX_DRAWN_LEAVES):
        st.code(rules_text(s), language=None)


def gain_words(gain: float, points: str = "points") -> str:
    """'the network gains 9.3 points', 'the network is 1.8 points behind', 'as good as the network' (`points`:
    'R² points' for a number to predict)."""
    shown = 100 * gain
    if abs(shown) < 0.05:
        return "as good as the network"
    return f"the network gains {shown:.1f} {points}" if shown > 0 else f"the network is {-shown:.1f} {points} behind"


def _is_r2(box: GlassboxComparison) -> bool:
    return box.score_name != "accuracy"


def score_shown(box: GlassboxComparison, score: float) -> str:
    """A test score as the page words it: '96.5%', or 'R² 0.42' for a number to predict."""
    return f"{box.score_name} {score:.3f}" if _is_r2(box) else percent(score)


def _glassbox_rows(report: GlobalReport) -> tuple[pd.DataFrame, dict[str, ColumnConfig]]:
    """The table of the network and each glassbox, and its column formats (accuracy in %, or R² as it is)."""
    box = report.glassbox
    r2 = _is_r2(box)
    score, gain = (
        (f"test {box.score_name}", "network's gain (R² points)") if r2 else ("test accuracy", "network's gain (points)")
    )
    scale = 1.0 if r2 else 100.0
    rows = [(
        "the network", box.network_score, 1.0, f"{report.model}, the run's model"
    )] + [(m.name, m.score, m.spearman, m.description) for m in box.models]  # fmt: skip
    table = pd.DataFrame(
        [
            {
                "model": name,
                score: scale * value,
                gain: 100 * (box.network_score - value),
                SPEARMAN: spearman,
                "what it is": what,
            }
            for name, value, spearman, what in rows
        ]
    )
    formats = {
        score: st.column_config.NumberColumn(format="%.3f" if r2 else "%.1f%%"),
        gain: st.column_config.NumberColumn(format="%+.1f"),
        SPEARMAN: st.column_config.NumberColumn(format="%+.2f"),
    }
    return table, formats


def glassbox_section(report: GlobalReport) -> None:
    box = report.glassbox
    points = "R² points" if _is_r2(box) else "points"
    parts = [
        f"{m.name} {score_shown(box, m.score)} ({gain_words(box.network_score - m.score, points)})" for m in box.models
    ]
    said = (
        f"scores **{score_shown(box, box.network_score)}**"
        if _is_r2(box)
        else f"is right on **{percent(box.network_score)}**"
    )
    st.markdown(f"On the same {box.test_rows:,} held-out rows the network {said}; " + "; ".join(parts) + ".")
    table, formats = _glassbox_rows(report)
    st.dataframe(table, hide_index=True, width="stretch", column_config=formats)
    r2_point = " An R² point is 0.01 of R² (a hundredth of the target's variance explained)." if _is_r2(box) else ""
    st.caption(
        f"Both trained with scikit-learn on the same {box.train_rows:,} training rows. Spearman: the rank "
        "correlation of the glassbox's own column importances ("
        + "; ".join(m.importance_kind for m in box.models)
        + f") with the network's permutation importance; near +1, the readable model leans on the same columns.{r2_point}"
    )


def _document(report: GlobalReport, options: GlobalOptions, run_id: str) -> tuple[dict[str, object], dict[str, bytes]]:
    document, files = result_document(
        "global",
        report,
        run=run_id,
        inputs={"split": "test", "rows": report.rows},
        parameters=jsonable(asdict(options)),
    )
    return document, files


def global_zip(report: GlobalReport, options: GlobalOptions, run_id: str) -> bytes:
    """global.json, its arrays and every figure, the files `xaidash global --out` writes."""
    from xaidash.explainers.tabular.report_figures import figure_files

    document, files = _document(report, options, run_id)
    figures = figure_files(report)
    document = {**document, "figures": sorted(figures)}
    return zip_bytes({RESULT_JSON: json_text(document).encode("utf-8"), **files, **figures})


def global_json(report: GlobalReport, options: GlobalOptions, run_id: str) -> bytes:
    """global.json alone (large arrays are named, not inlined: the zip holds them)."""
    return json_text(_document(report, options, run_id)[0]).encode("utf-8")


def downloads(report: GlobalReport, options: GlobalOptions, run_id: str, key: str) -> None:
    st.caption(
        f"Downloads: {RESULT_JSON} with every value shown here (importances with their intervals, the grids, PDP and "
        "ICE curves, the pair's map, the surrogate's rules and nodes, the glassbox scores, global SHAP), its larger "
        "arrays as .npy and every figure as PNG with its colour bar, in one zip: the files `xaidash global --out` "
        f"writes. Or {RESULT_JSON} alone."
    )
    row = st.container(horizontal=True, vertical_alignment="top")
    row.download_button(
        "Download all (.zip)",
        data=lambda: global_zip(report, options, run_id),
        file_name=f"global-{report.dataset}.zip",
        mime="application/zip",
        key=f"global_dl_zip_{key}",
        on_click="ignore",
        type="primary",
        icon=":material/download:",
    )
    row.download_button(
        f"{RESULT_JSON}",
        data=lambda: global_json(report, options, run_id),
        file_name=f"global-{report.dataset}.json",
        mime="application/json",
        key=f"global_dl_json_{key}",
        on_click="ignore",
        icon=":material/data_object:",
    )
