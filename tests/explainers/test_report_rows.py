"""A table row in the explain report: report.json keeps its raw values and its cells as shown (category names), the
report reads back to the same JSON and gives the row back as the pages take it, and the HTML page shows its values
as a table; no input image is written for a row."""

from __future__ import annotations

import json

import numpy as np
import torch

from xaidash.data.registry import get_info, load_split
from xaidash.explainers.figures.report import ExplainReport, MethodSetting, ReportSettings, session_report
from xaidash.explainers.modalities import adapter_of
from xaidash.explainers.scoring import explain_and_score
from xaidash.explainers.session import MethodResult
from xaidash.models import ModelBundle, build_model, get_spec


def test_a_table_row_is_kept_with_its_values_and_cells() -> None:
    info = get_info("planted")
    torch.manual_seed(0)
    bundle = ModelBundle(build_model("tabular_mlp", info).eval(), get_spec("tabular_mlp"), info, torch.device("cpu"))
    row = load_split("planted", "test").rows[3]
    e = explain_and_score(bundle, row.unsqueeze(0), "occlusion", {}, None, with_metrics=False).explanation
    r = session_report(
        bundle,
        "t",
        [("test #3", row, 1)],
        bundle.predict_proba(row.unsqueeze(0)).numpy(),
        [MethodResult("occlusion", e)],
        ReportSettings([MethodSetting("occlusion", "Occlusion")], display="bars"),
    )
    d = json.loads(r.to_json())
    kept = d["inputs"][0]
    assert np.allclose(kept["values"], row.numpy())
    group = next(j for j, c in enumerate(info.columns) if c.categorical)
    name = info.columns[group].categories[int(row[group])]
    assert kept["cells"] == list(adapter_of("table").input_cells(info, row))
    assert kept["cells"][group] == f"{info.columns[group].name} = {name}"
    assert d["inputs"][0]["file"] is None and not any(f.startswith("inputs/") for f in r.files())

    back = ExplainReport.from_json(r.to_json())
    assert back.to_json() == r.to_json()
    assert np.array_equal(back.inputs[0].raw(), row.numpy())

    page = r.to_html()
    assert 'class="row-values"' in page and f"<td>{name}</td>" in page
    assert 'class="xai-cbar"' in page or "colour" in page
