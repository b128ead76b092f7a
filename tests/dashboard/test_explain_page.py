"""The Explain page through AppTest: colour bars with units and meaning under every map, honest shared
scales, one metrics table per input, diagnostics in a details panel, the gallery open and clickable, one
Download all, and the out-of-distribution hint."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

TIMEOUT = 180  # the page imports torch and captum on its first run


def _open(run_id: str) -> AppTest:
    at = AppTest.from_file(str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py"), default_timeout=TIMEOUT)
    at.session_state["xai_selected_run"] = run_id
    at.run()
    at.switch_page("views/explain.py").run()
    _ok(at)
    return at


def _ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def _values(elements) -> list[str]:
    return [str(e.value) for e in elements]


def _legends(at: AppTest) -> list[str]:
    return [v for v in _values(at.markdown) if 'class="xai-cbar"' in v]


def _map_captions(at: AppTest) -> dict[str, str]:
    """method label -> the caption under its (first) map."""
    out: dict[str, str] = {}
    current = None
    for c in _values(at.caption):
        if c.startswith("**") and c.endswith("**"):
            current = c.strip("*")
        elif current and current not in out and c.startswith("target "):
            out[current] = c
    return out


def test_maps_get_legends_units_tables_and_details(runs) -> None:
    at = _open(runs["image"])
    # A sample is chosen by default; the gallery of an image run opens until the user closes it (issue 21).
    gallery = next(e for e in at.expander if e.label.startswith("Gallery"))
    assert gallery.label == "Gallery" and gallery.proto.expanded
    at.multiselect(key="explain_methods").set_value(["saliency", "ig", "deeplift", "occlusion"]).run()
    _ok(at)

    # Every map: a colour bar with its range, units and what the colours mean (the enlarged view repeats it).
    legends = _legends(at)
    assert len(legends) >= 4
    saliency = next(v for v in legends if "∂ logit / ∂ pixel" in v)
    assert "≤" not in saliency and "bright" in saliency and "red =" not in saliency, "unsigned: never red-blue"
    ig = next(v for v in legends if "logit contribution per pixel" in v)
    assert "red = raises" in ig and "blue" in ig and "this map:" in ig
    assert any("Δ logit per region" in v for v in legends)
    assert any("99th percentile" in c for c in _values(at.caption))

    # A map's caption is its target class and time only.
    captions = _map_captions(at)
    assert set(captions) == {"Saliency", "Integrated Gradients", "DeepLift", "Occlusion"}
    for text in captions.values():
        assert text.startswith("target ") and " s" in text and "AUC" not in text and "delta" not in text

    # One metrics table for the input: methods as rows, arrows in the header, the best value starred.
    table = next(d.value for d in at.dataframe if any("Deletion AUC" in str(c) for c in d.value.columns))
    assert list(table.index) == ["Saliency", "Integrated Gradients", "DeepLift", "Occlusion"]
    assert "Deletion AUC ↓" in table.columns and "Insertion AUC ↑" in table.columns
    # The cheap complexity metrics from the metric registry; the costly ones are Compare's.
    assert "Sparseness ↑" in table.columns and "Complexity (nats) ↓" in table.columns
    assert not any(c.startswith(("Local Lipschitz", "ROAD", "Random-logit")) for c in table.columns)
    assert sum("★" in str(v) for v in table["Deletion AUC ↓"]) >= 1

    # Diagnostics behind a details panel.
    details = next(e for e in at.expander if e.label.startswith("Details"))
    diag = details.dataframe[0].value
    assert "convergence_delta" in set(diag["item"])

    # Shared scale: only IG and DeepLift (both logit per pixel) share one; occlusion keeps its own.
    at.toggle(key="explain_shared").set_value(True).run()
    _ok(at)
    legends = _legends(at)
    assert any("shared scale: Integrated Gradients, DeepLift" in v for v in legends)
    assert not any("shared scale" in v for v in legends if "Δ logit per region" in v)
    assert any("same units" in c for c in _values(at.caption))

    # Downloads: one zip of everything beside the single files.
    labels = [b.label for b in at.get("download_button")]
    assert "Download all (.zip)" in labels and any(label.startswith("Report") for label in labels)

    # The out-of-distribution hint: a warning or one line with its figures for every input.
    hints = [v for v in _values(at.caption) + _values(at.warning) if "nearest training sample" in v]
    assert len(hints) == 1


def test_a_gallery_click_adds_and_removes_a_sample(runs) -> None:
    at = _open(runs["image"])
    at.multiselect(key="explain_methods").set_value(["saliency"]).run()
    picks = at.multiselect(key="explain_samples_shapes__all")
    assert picks.value == [0]
    # The first click replaces the sample picked for the user (#0 no longer stays selected, issue 21) ...
    next(b for b in at.button if b.label.startswith("☐ #1 ")).click().run()
    _ok(at)
    assert at.multiselect(key="explain_samples_shapes__all").value == [1]
    # ... later clicks add.
    next(b for b in at.button if b.label.startswith("☐ #0 ")).click().run()
    _ok(at)
    assert at.multiselect(key="explain_samples_shapes__all").value == [1, 0]
    assert len(_map_captions(at)) == 1 and sum(v.startswith("**test #") for v in _values(at.markdown)) == 2
    remove = next(b for b in at.button if b.label.startswith("☑ #1 "))
    remove.click().run()
    assert at.multiselect(key="explain_samples_shapes__all").value == [0]


def test_text_maps_get_legends_too(runs) -> None:
    at = _open(runs["text"])
    at.radio(key="explain_source").set_value("Type text").run()
    at.multiselect(key="explain_methods").set_value(["saliency", "ig"]).run()
    _ok(at)
    legends = _legends(at)
    assert any("logit contribution per word" in v for v in legends)
    assert any("∂ logit / ∂ embedding" in v for v in legends)
    assert sum("xai-tokens" in v for v in _values(at.markdown)) == 2 * 2


def test_cancel_stops_the_page_and_explain_again_resumes_with_the_finished_maps(runs) -> None:
    at = _open(runs["image"])
    before = _map_captions(at)
    assert before, "the default sample is explained on arrival"
    at.session_state["explain_cancelled"] = True  # what the Cancel button's callback sets (it is only drawn while
    at.run()  # the page computes, which AppTest cannot interrupt; the browser test clicks it)
    _ok(at)
    assert any(str(i.value).startswith("Cancelled.") for i in at.info)
    assert not _map_captions(at)  # the page stopped before the results
    at.button(key="explain_again").click().run()
    _ok(at)
    assert not any(str(i.value).startswith("Cancelled.") for i in at.info)
    assert _map_captions(at).keys() == before.keys()  # back, from the cache
