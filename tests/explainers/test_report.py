"""The explain report (explainers/figures/report.py): one JSON format with its version that reads back, the same
files in a folder and a zip, one top-k, and a self-contained HTML page that escapes every user text and embeds
every map."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest
import torch
from image_bundles import fresh_bundle

from xaidash.data.registry import DatasetInfo, get_info, load_split
from xaidash.data.tokenizer import WordVocab
from xaidash.explainers.figures.png import data_uri
from xaidash.explainers.figures.report import (
    FORMAT_VERSION,
    ExplainReport,
    MethodResult,
    MethodSetting,
    ReportSettings,
    build_report,
    session_report,
    top_predictions,
)
from xaidash.explainers.params import ExplainError
from xaidash.explainers.scoring import explain_and_score
from xaidash.models import ModelBundle, build_model, get_spec

HOSTILE = "<script>alert(1)</script>"
HOSTILE_INFO = DatasetInfo(
    "rgb16x", "image", ("a", "<img src=x onerror=alert(2)>", "c"), (3, 16, 16), (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)
)


@pytest.fixture(scope="module")
def report() -> ExplainReport:
    """Two images (one with a hostile name), three methods with metrics, one method that failed with markup in its
    error, on a model whose class names hold markup."""
    bundle = fresh_bundle("resnet_small", HOSTILE_INFO)
    x = torch.rand(2, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    results = []
    for m in ("saliency", "ig", "gradcam"):
        s = explain_and_score(bundle, x, m, {"steps": 4} if m == "ig" else {}, None, with_metrics=True, steps=4)
        results.append(MethodResult(m, s.explanation, s.metrics, s.metric_errors))
    results.append(MethodResult("lime", error=f"ValueError: {HOSTILE}"))
    settings = ReportSettings(
        [MethodSetting(m, m.upper(), {}) for m in ("saliency", "ig", "gradcam", "lime")],
        scale_mode="units",
        metrics=True,
        steps=4,
        extra={"note": HOSTILE},
    )
    probs = bundle.predict_proba(x).numpy()
    inputs = [(HOSTILE, x[0], 1), ("plain.png", x[1], None)]
    return session_report(bundle, f"run{HOSTILE}", inputs, probs, results, settings, notes=[HOSTILE], source="test")


def test_top_predictions_is_the_one_top_k() -> None:
    top = top_predictions([0.2, 0.5, 0.2, 0.1], ("a", "b", "c", "d"), k=3)
    assert [(p.cls, p.name) for p in top] == [(1, "b"), (0, "a"), (2, "c")]  # ties in class order
    assert len(top_predictions([0.5, 0.5], ("a", "b"), k=10)) == 2 and top_predictions([1.0], ("a",), k=0) == []


def test_json_has_its_version_and_reads_back(report: ExplainReport) -> None:
    text = report.to_json()
    d = json.loads(text)
    assert d["format_version"] == FORMAT_VERSION == 1 and d["kind"] == "xaidash.explain_report"
    assert [r["key"] for r in d["runs"]] == ["A"] and d["runs"][0]["model"] == "resnet_small"
    assert d["settings"]["scale_mode"] == "units" and [m["id"] for m in d["settings"]["methods"]][-1] == "lime"
    assert len(d["inputs"]) == 2 and d["inputs"][0]["label"] == {"class": 1, "name": HOSTILE_INFO.classes[1]}
    assert len(d["inputs"][0]["predictions"]["A"]) == 3
    entries = d["explanations"]
    assert [(e["input"], e["method"]) for e in entries] == [
        (i, m) for i in (0, 1) for m in ("saliency", "ig", "gradcam", "lime")
    ]
    lime = entries[3]
    assert lime["figure"] is None and HOSTILE in lime["error"] and lime["files"] == {"map": None, "attribution": None}
    ig = entries[1]
    assert ig["figure"]["scale_mode"] == "units" and ig["figure"]["caption"]["note"] == ""  # no other unit mate
    assert ig["files"] == {"map": "maps/input_00_ig.png", "attribution": "attributions/input_00_ig.npy"}
    assert "deletion_auc" in ig["metrics"] and d["metric_info"]["deletion_auc"]["better"] == "lower is better"
    assert "NaN" not in text and "Infinity" not in text  # plain JSON: undefined values are null

    back = ExplainReport.from_json(text, report.files())
    assert back.to_json() == text
    assert back.figure(0, "ig") is not None and back.figure(0, "ig").value_range == report.figure(0, "ig").value_range

    newer = json.dumps({**d, "format_version": FORMAT_VERSION + 1})
    with pytest.raises(ExplainError, match="newer"):
        ExplainReport.from_json(newer)
    with pytest.raises(ExplainError, match="Not an xaidash"):
        ExplainReport.from_json(json.dumps({"methods": {}}))


def test_folder_and_zip_hold_the_same_bytes(report: ExplainReport, tmp_path) -> None:
    files = report.files()
    assert sorted(files) == sorted(
        ["report.json", "inputs/input_00.png", "inputs/input_01.png"]
        + [f"maps/input_0{i}_{m}.png" for i in (0, 1) for m in ("saliency", "ig", "gradcam")]
        + [f"attributions/input_0{i}_{m}.npy" for i in (0, 1) for m in ("saliency", "ig", "gradcam")]
    )
    z = zipfile.ZipFile(io.BytesIO(report.to_zip()))
    assert sorted(z.namelist()) == sorted(files) and all(z.read(n) == files[n] for n in files)
    assert report.to_zip() == report.to_zip()  # reproducible, timestamps included
    report.write_dir(tmp_path / "out")
    assert {
        p.relative_to(tmp_path / "out").as_posix(): p.read_bytes() for p in (tmp_path / "out").rglob("*") if p.is_file()
    } == files
    assert files["maps/input_00_ig.png"] == report.figure(0, "ig").figure_png
    attr = np.load(io.BytesIO(files["attributions/input_01_gradcam.npy"]))
    assert attr.shape == (16, 16) and np.array_equal(attr, report.figure(1, "gradcam").values)
    again = ExplainReport.read_dir(tmp_path / "out")
    assert again.to_json() == report.to_json()


def test_html_escapes_user_text_and_embeds_every_map(report: ExplainReport) -> None:
    page = report.to_html()
    assert "<script" not in page.lower() and "onerror=alert" not in page.replace("onerror=alert(2)&gt;", "")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(2)&gt;" in page
    for e in report.explanations:
        if e.figure is not None:
            assert data_uri(e.figure.figure_png) in page, e.method  # every map with its colour bar, embedded
    assert page.count('class="map"') == 6 and page.count('class="input-img"') == 2
    assert "http://" not in page and "https://" not in page and "<link" not in page  # nothing to fetch
    assert "Deletion AUC ↓" in page and "lower is better" in page and "Run" in page and "Settings" in page


def test_text_report_escapes_typed_text() -> None:
    info = get_info("cues")
    vocab = WordVocab.build(load_split("cues", "train").texts[:200])
    torch.manual_seed(0)
    model = build_model("text_cnn", info, vocab_size=len(vocab)).eval()
    bundle = ModelBundle(model=model, spec=get_spec("text_cnn"), info=info, device=torch.device("cpu"), tokenizer=vocab)
    typed = f"great {HOSTILE} film"
    e = explain_and_score(bundle, [typed], "saliency", {}, None, with_metrics=False).explanation
    r = session_report(
        bundle,
        "t",
        [(typed, typed, None)],
        bundle.predict_proba([typed]).numpy(),
        [MethodResult("saliency", e)],
        ReportSettings([MethodSetting("saliency", "Saliency")], display="tokens"),
    )
    page = r.to_html()
    assert "<script" not in page and page.count("&lt;script&gt;") >= 2  # the typed text and its highlighted words
    assert 'class="xai-cbar"' in page and 'class="xai-tokens"' in page
    assert sorted(r.files()) == ["maps/input_00_saliency.html", "report.json"]
    assert "&lt;script&gt;" in r.files()["maps/input_00_saliency.html"].decode()
    assert ExplainReport.from_json(r.to_json()).to_json() == r.to_json()


def test_a_report_needs_a_run() -> None:
    with pytest.raises(ExplainError, match="run"):
        build_report([], [], [], ReportSettings([]))


def test_compare_and_side_by_side_reports() -> None:
    from xaidash.explainers.comparison.compare import compare_methods, comparison_report
    from xaidash.explainers.comparison.side_by_side import explain_pair, pair_report
    from xaidash.explainers.figures.report import RunInfo
    from xaidash.explainers.samples import Sample

    a, b = fresh_bundle("resnet_small", HOSTILE_INFO, seed=0), fresh_bundle("resnet_small", HOSTILE_INFO, seed=1)
    x = torch.rand(2, 3, 16, 16, generator=torch.Generator().manual_seed(3))
    result = compare_methods(a, Sample(x, [0, None], [4, 9]), ["saliency", "gradcam"], steps=4, sanity=False)
    r = comparison_report(a, "run-a", result, {"inputs": "chosen indices 4, 9"})
    assert [i.name for i in r.inputs] == ["test #4", "test #9"] and r.settings.extra["inputs"] == "chosen indices 4, 9"
    assert len(r.explanations) == 4 and all(
        e.figure is not None and "deletion_auc" in e.metrics for e in r.explanations
    )
    assert r.inputs[0].predictions["A"][0].probability == pytest.approx(float(result.probabilities[0].max()))

    pairs = [explain_pair(a, b, x, m) for m in ("saliency", "ig")]
    runs = (RunInfo.of(a, "run-a", "A"), RunInfo.of(b, "run-b", "B", epoch=1))
    p = pair_report(
        runs,
        [("one", x[0], 1), ("two", x[1], None)],
        (a.predict_proba(x).numpy(), b.predict_proba(x).numpy()),
        pairs,
        shared=True,
    )
    assert [(e.input, e.method, e.run) for e in p.explanations][:4] == [
        (0, "saliency", "A"), (0, "saliency", "B"), (0, "ig", "A"), (0, "ig", "B")
    ]  # fmt: skip
    fa, fb = p.figure(0, "ig", "A"), p.figure(0, "ig", "B")
    assert fa is not None and fb is not None and fa.scale == fb.scale  # one scale where the units match
    assert fa.caption.note == "model A" and fb.caption.note == "model B" and fa.map_width >= 320
    assert set(p.inputs[0].predictions) == {"A", "B"} and "maps/input_00_B_ig.png" in p.files()
    page = p.to_html()
    assert "Model B" in page and page.count('class="map"') == 8
    assert ExplainReport.from_json(p.to_json(), p.files()).to_json() == p.to_json()
