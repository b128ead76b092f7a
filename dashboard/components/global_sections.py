"""The Global view's readable parts: the surrogate tree (its fidelity in words, the tree drawn, its rules as an
indented list), the glassbox models beside the network, and the downloads (global.json as `xaidash global --out`
writes it, with its arrays and every figure, in one zip; or the JSON alone)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict

import pandas as pd
import streamlit as st

from xaidash.dashboard.components.global_tree import colour_key, tree_dot
from xaidash.data.formatting import percent
from xaidash.explainers.figures.jsonable import jsonable
from xaidash.explainers.figures.report_files import json_text, zip_bytes
from xaidash.explainers.figures.result_json import result_document
from xaidash.explainers.tabular.api import GlobalOptions, GlobalReport
from xaidash.explainers.tabular.cli import RESULT_JSON
from xaidash.explainers.tabular.surrogate import Surrogate, TreeNode

MAX_DRAWN_LEAVES = 16  # a wider tree is shown as its rules only (a drawing of 256 leaves cannot be read)
INDENT = "    "


def fidelity_sentence(surrogate: Surrogate) -> str:
    """'The surrogate tree agrees with the network on 94% of held-out rows (376 of 400).'"""
    return (
        f"The surrogate tree agrees with the network on {surrogate.fidelity:.0%} of held-out rows "
        f"({surrogate.agree} of {surrogate.held_out})."
    )


def _rule_lines(node: TreeNode, by_id: dict[int, TreeNode], depth: int) -> Iterator[str]:
    pad = INDENT * depth
    if node.yes is None or node.no is None:
        yield (
            f"{pad}→ {node.predicted}   ({node.rows} training rows, {node.purity:.0%} of them predicted so by the "
            "network)"
        )
        return
    for child in (by_id[node.yes], by_id[node.no]):
        yield f"{pad}if {child.condition}:"
        yield from _rule_lines(child, by_id, depth + 1)


def rules_text(surrogate: Surrogate) -> str:
    """The tree as nested if-lines, a leaf's class after an arrow."""
    by_id = {n.id: n for n in surrogate.nodes}
    return "\n".join(_rule_lines(surrogate.nodes[0], by_id, 0))


def surrogate_section(report: GlobalReport) -> None:
    s = report.surrogate
    st.markdown(f"**{fidelity_sentence(s)}**")
    st.caption(
        f"A decision tree of depth {s.depth} fitted to the network's predicted classes on the {s.fitted_rows:,} "
        "training rows (not to the true labels), so its rules describe the network, and only as far as it agrees "
        f"with it: on {s.held_out - s.agree} held-out rows the network does something the tree does not say. On "
        f"the rows it was fitted to it agrees on {s.train_fidelity:.0%}; against the true labels it is right on "
        f"{s.accuracy:.0%} of held-out rows."
    )
    leaves = sum(n.yes is None for n in s.nodes)
    if leaves <= MAX_DRAWN_LEAVES:
        st.graphviz_chart(tree_dot(s, report.classes), width="stretch")
        st.caption(
            f"Read from the left. Each box: the column split on (or, at a leaf, the class the tree predicts and the "
            f"share of its rows the network puts in that class) and the training rows reaching it by the network's "
            f"class ({' / '.join(report.classes)}); each arrow: the condition on that branch. Leaves are coloured by "
            f"their class ({colour_key(report.classes)}), paler when their rows are more mixed."
        )
    else:
        st.caption(f"{leaves} leaves are too many to draw readably: its rules below.")
    with st.expander("The tree's rules, as text", expanded=leaves > MAX_DRAWN_LEAVES):
        st.code(rules_text(s), language=None)


def gain_words(gain: float) -> str:
    """'the network gains 9.3 points', 'the network is 1.8 points behind', 'as good as the network'."""
    points = 100 * gain
    if abs(points) < 0.05:
        return "as good as the network"
    return f"the network gains {points:.1f} points" if points > 0 else f"the network is {-points:.1f} points behind"


def glassbox_section(report: GlobalReport) -> None:
    box = report.glassbox
    parts = [f"{m.name} {percent(m.accuracy)} ({gain_words(box.network_accuracy - m.accuracy)})" for m in box.models]
    st.markdown(
        f"On the same {box.test_rows:,} held-out rows the network is right on **{percent(box.network_accuracy)}**; "
        + "; ".join(parts)
        + "."
    )
    table = pd.DataFrame(
        [
            {
                "model": "the network",
                "test accuracy": 100 * box.network_accuracy,
                "network's gain (points)": 0.0,
                "Spearman with the network's importances": 1.0,
                "what it is": f"{report.model}, the run's model",
            }
        ]
        + [
            {
                "model": m.name,
                "test accuracy": 100 * m.accuracy,
                "network's gain (points)": 100 * (box.network_accuracy - m.accuracy),
                "Spearman with the network's importances": m.spearman,
                "what it is": m.description,
            }
            for m in box.models
        ]
    )
    st.dataframe(
        table,
        hide_index=True,
        width="stretch",
        column_config={
            "test accuracy": st.column_config.NumberColumn(format="%.1f%%"),
            "network's gain (points)": st.column_config.NumberColumn(format="%+.1f"),
            "Spearman with the network's importances": st.column_config.NumberColumn(format="%+.2f"),
        },
    )
    st.caption(
        f"Both trained with scikit-learn on the same {box.train_rows:,} training rows. Spearman: the rank "
        "correlation of the glassbox's own column importances ("
        + "; ".join(m.importance_kind for m in box.models)
        + ") with the network's permutation importance; near +1, the readable model leans on the same columns."
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
