"""The default Compare run on the shared trained shapes run (resnet_small) shows the ranking view: the sentence on
whether the metrics agree, one chart per ranked metric with its direction and 95% intervals, and the table."""

from __future__ import annotations

import json

from app_pages import assert_ok, open_run_page, texts

from xaidash.explainers.scoring import METRICS

TIMEOUT = 240


def _chart_specs(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.main.get("vega_lite_chart")]


def test_the_default_compare_run_ranks_the_methods_with_intervals(trained_shapes_run, monkeypatch) -> None:
    at = open_run_page(trained_shapes_run.run, "compare", monkeypatch, TIMEOUT)
    at.toggle(key="compare_sanity").set_value(False)  # the ranking reads the metrics only; keeps the test short
    at.button(key="compare_go").click().run()
    assert_ok(at)
    assert "Ranking" in [s.value for s in at.subheader]
    summary = " ".join(texts(at.info))
    assert "Metrics disagree" in summary or "best on every metric" in summary or "do not separate" in summary, summary
    assert "Kendall" in summary
    titles = {
        f"{title}: {better}": c for c, (title, better) in METRICS.items() if better.startswith(("lower", "higher"))
    }
    ranked = []
    for spec in _chart_specs(at):
        title = spec.get("title", {})
        text = title.get("text") if isinstance(title, dict) else title
        if text in titles:
            ranked.append(titles[text])
            layers = spec["layer"]
            fields = {layer["encoding"]["x"]["field"] for layer in layers}
            assert {"ci_low", "mean"} <= fields and layers[0]["encoding"]["x2"]["field"] == "ci_high"
            assert layers[0]["encoding"]["x"]["title"].endswith("mean over 16 inputs")
            assert layers[0]["encoding"]["y"]["title"] == "method (best first)"
            assert any("95% bootstrap interval" in s for s in title["subtitle"])
    assert {"deletion_auc", "insertion_auc"} <= set(ranked), ranked
    assert "seconds" not in ranked  # one timing per batch: no spread to rank by, and the caption says so
    assert any("is not ranked: measured once for the whole batch" in c for c in texts(at.caption))
    table = next(d.value for d in at.dataframe if "mean [95% interval]" in d.value.columns)
    deletion = table[table.metric.str.startswith(METRICS["deletion_auc"][0])]
    assert list(deletion["rank"]) == sorted(deletion["rank"]) and deletion["rank"].iloc[0] == 1
    assert all("[" in v for v in deletion["mean [95% interval]"])
