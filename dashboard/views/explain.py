"""Explain: inputs, the model's prediction, and several methods' maps (one block per input: the prediction and an
out-of-distribution hint, the maps with colour bars in rows that wrap, one metrics table, the diagnostics)."""

from __future__ import annotations

import functools
import io
import json
import zipfile
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import streamlit as st
import torch
from PIL import Image

from xaidash.dashboard import services
from xaidash.dashboard.components.charts import topk_chart
from xaidash.dashboard.components.explain_maps import CARD_WIDTH, map_card, ood_hint, ood_scores
from xaidash.dashboard.components.explain_tables import BEST, diagnostics_table, metrics_table
from xaidash.dashboard.components.images import png_bytes, to_pil
from xaidash.dashboard.components.inputs import PickedInput, input_picker
from xaidash.dashboard.components.model_queue import leased_model
from xaidash.dashboard.components.params import param_controls
from xaidash.dashboard.components.stored_maps import show_stored_sample
from xaidash.dashboard.errors import show_error
from xaidash.dashboard.state import require_bundle
from xaidash.explainers import list_methods, methods_for
from xaidash.explainers.explanation import Explanation
from xaidash.explainers.figures.render import (
    DEFAULT_UPSCALE,
    LARGE_UPSCALE,
    OVERLAY_ALPHA,
    SCALE_MODES,
    ScaleMode,
    colorbar,
    colorbar_html,
    greyscale,
    heatmap,
    highlight_tokens,
    map_legend,
    map_scales,
    overlay,
    with_legend,
)
from xaidash.explainers.metrics.deletion import CURVE_STEPS
from xaidash.explainers.scoring import METRICS, explain_and_score
from xaidash.models.bundle import ModelBundle

DEFAULT_METHODS = ("saliency", "ig", "gradcam", "lime")
TOP_K = 5


@dataclass
class Result:
    explanation: Explanation | None = None
    metrics: dict[str, list[float]] = field(default_factory=dict)
    metric_errors: dict[str, str] = field(default_factory=dict)
    error: BaseException | None = None
    cached: bool = False


def batch_of(inputs: list[PickedInput]) -> torch.Tensor | list[str]:
    texts = [p.raw for p in inputs if isinstance(p.raw, str)]
    return texts if texts else torch.stack([p.raw for p in inputs if isinstance(p.raw, torch.Tensor)])


def compute(
    bundle: ModelBundle,
    raw: Any,
    inputs: list[PickedInput],
    method: str,
    params: dict[str, Any],
    target: int | None,
    with_metrics: bool,
) -> Result:
    """One method's maps (and metrics) through the same function as `xaidash explain`; a method that needs
    background samples gets the default set from `explain` itself."""
    given = [p.mask for p in inputs if p.mask is not None]
    masks = np.stack(given) if len(given) == len(inputs) else None
    rationales = [p.rationale for p in inputs] if any(p.rationale for p in inputs) else None
    with leased_model(bkey, bundle) as replica:
        scored = explain_and_score(
            replica,
            raw,
            method,
            params,
            target,
            with_metrics=with_metrics,
            masks=masks,
            rationales=rationales,
            steps=CURVE_STEPS,
        )
    return Result(scored.explanation, scored.metrics, scored.metric_errors)


st.title("Explain")
run, bundle = require_bundle("explain")
bkey = services.run_key(run)
info = bundle.info
st.caption(f"Run `{run.id}`: **{bundle.spec.name}** on **{info.name}**, on {bundle.device}.")
if show_stored_sample(run, bundle):  # ?stored=SPLIT:INDEX (a click in Compare's data-set report): stored maps only
    st.stop()

# ---- inputs ------------------------------------------------------------------------------------
with st.container(border=True):
    inputs = input_picker(bundle, "explain", bundle_key=bkey)

# ---- methods -----------------------------------------------------------------------------------
usable = methods_for(bundle)
ids = [m.id for m in usable]
by_id = {m.id: m for m in usable}
with st.container(border=True):
    # Defaults on first use; the choice survives visits to other pages (Streamlit drops the state of widgets
    # not drawn, hence the copy under another key); after a change of run, only methods the model supports.
    stored = st.session_state.get("explain_methods", st.session_state.get("explain_methods_kept"))
    if stored is None or any(m not in ids for m in stored):
        stored = [m for m in (stored or []) if m in ids] or [m for m in DEFAULT_METHODS if m in ids][:3] or ids[:2]
    st.session_state["explain_methods"] = stored
    chosen = st.multiselect(
        "Methods",
        ids,
        format_func=lambda i: by_id[i].label,
        key="explain_methods",
        help="the methods that apply to this model",
    )
    st.session_state["explain_methods_kept"] = chosen
    c2, c4, c3 = st.columns([2, 2, 3])
    target_name = c2.selectbox(
        "Target class",
        ["predicted class", *info.classes],
        key=f"explain_target_{info.name}",
        help="the class whose evidence the maps show",
    )
    shared = c3.toggle(
        "Shared scale per unit",
        key="explain_shared",
        help="maps of an input whose values are in the same units (e.g. IG, DeepLift and GradientSHAP: logit "
        "per pixel) share one colour scale; a method in units of its own keeps its own. Off: each map on its "
        "own scale, saturating at its 99th percentile of |value|",
    )
    display = "tokens"
    if bundle.modality == "image":
        display = c4.radio(
            "Show maps as",
            ["overlay", "heatmap"],
            horizontal=True,
            key="explain_display",
            help="overlay: the map blended over the input (opacity grows with |value|); heatmap: the map alone",
        )
    with_metrics = c3.toggle(
        "Quality metrics",
        value=True,
        key="explain_metrics",
        help="deletion/insertion AUC, and pointing game, energy or completeness where they apply",
    )
    unusable = [m for m in list_methods(bundle.modality) if m.id not in ids]
    if unusable:
        st.caption(
            "Not available for this model: "
            + "; ".join(f"{m.label} ({(m.applies(bundle) or 'not supported').rstrip('.')})" for m in unusable)
        )
    params: dict[str, dict[str, Any]] = {}
    if chosen:
        cols = st.columns(min(3, len(chosen)))
        for j, m in enumerate(chosen):
            with cols[j % len(cols)].expander(f"{by_id[m].label} parameters"):
                params[m] = param_controls(by_id[m], bundle, "explain")
# Methods are drawn even without inputs so a choice survives switching the input source.
if not inputs:
    st.stop()
if not chosen:
    st.info("Pick at least one method.")
    st.stop()
raw = batch_of(inputs)
try:
    with leased_model(bkey, bundle) as replica:
        probs = replica.predict_proba(raw).numpy()
except Exception as err:  # noqa: BLE001
    show_error(err, "Prediction failed")
    st.stop()
target = None if target_name == "predicted class" else list(info.classes).index(target_name)

# ---- compute (cached per method: changing one method's parameters recomputes that method only) ----
cache = services.explanation_cache()
input_keys = tuple(p.key for p in inputs)
results: dict[str, Result] = {}
# A click on Cancel reruns the page, which interrupts the work at the next method (or leaves the queue for the
# model at once); the rerun it causes stops here. Methods finished before the click stay cached.
if st.session_state.pop("explain_cancelled", False):
    st.info("Cancelled. Methods finished before the click are kept: press **Explain again** or change a setting.")
    st.button("Explain again", key="explain_again", icon=":material/refresh:")
    st.stop()
cancel_slot = st.empty()
cancel_slot.button(
    "Cancel",
    key="explain_cancel",
    icon=":material/cancel:",
    on_click=lambda: st.session_state.update(explain_cancelled=True),
    help="stop after the method being computed (methods already finished are kept)",
)
bar = st.progress(0.0, text="Explaining…")
for j, m in enumerate(chosen):
    bar.progress(j / len(chosen), text=f"Explaining with {by_id[m].label} ({j + 1}/{len(chosen)})…")
    key = (bkey, input_keys, m, json.dumps(params.get(m, {}), sort_keys=True, default=str), target, with_metrics)
    try:
        value, hit = cache.get_or_compute(
            key, functools.partial(compute, bundle, raw, inputs, m, params.get(m, {}), target, with_metrics)
        )
        results[m] = Result(value.explanation, value.metrics, value.metric_errors, cached=hit)
    except Exception as err:  # noqa: BLE001 - one method failing must not hide the others
        results[m] = Result(error=err)
bar.empty()
cancel_slot.empty()

# ---- results: per input, the prediction, the maps (rows that wrap), one metrics table, details ---------
legends = {m: map_legend(by_id[m], bundle.modality) for m in chosen}
scale_mode: ScaleMode = "units" if shared else "percentile"
st.caption(
    "**Colour scale:** "
    + (
        "maps in the same units share one scale per input (e.g. IG, DeepLift and GradientSHAP: logit per pixel); "
        "a method in units of its own keeps its own scale, saturating at its 99th percentile of |value|."
        if shared
        else "each map on its own scale, saturating at its 99th percentile of |value| (values beyond get the end colour)."
    )
    + " Signed maps: red/white/blue around 0; unsigned maps: dark to bright (never red-blue)."
    + (" Overlays are drawn on a grey copy of the input." if display == "overlay" else "")
)
figures: dict[tuple[int, str], Any] = {}  # (input, method) -> the map with its colour bar, for the zip
with leased_model(bkey, bundle) as replica:
    ood_figures, ood_reason = ood_scores(replica, bkey, raw)
if ood_reason:
    st.caption(ood_reason)
for i, p in enumerate(inputs):
    pred = int(probs[i].argmax())
    truth = f" · true: **{info.classes[p.label]}**" if p.label is not None else ""
    mark = "" if p.label is None else (" ✓" if p.label == pred else " ✗")
    done = {m: r.explanation for m, r in results.items() if r.explanation is not None}
    maps = {m: e.item(i) for m, e in done.items()}
    scales = map_scales(maps, {m: legends[m].group for m in maps}, scale_mode)
    with st.container(border=True):
        with st.container(horizontal=True, gap="medium"):
            if bundle.modality == "image":
                st.image(to_pil(p.raw, 224), width=200)
            with st.container(width=300):
                if bundle.modality == "text":
                    st.markdown(f"> {p.raw}")
                st.markdown(f"**{p.name}**{truth} · predicted: **{info.classes[pred]}** ({probs[i, pred]:.0%}){mark}")
                ood_hint(ood_figures[i] if ood_figures else None)
            with st.container(width=300):
                st.altair_chart(topk_chart(probs[i], info.classes, TOP_K, p.label), width="stretch")
        with st.container(horizontal=True, gap="small"):
            for m in chosen:
                r = results[m]
                e = r.explanation
                if e is None:
                    with st.container(width=CARD_WIDTH):
                        st.caption(f"**{by_id[m].label}**")
                        show_error(r.error or RuntimeError("no explanation"), by_id[m].label)
                    continue
                lg, a, scale = legends[m], maps[m], scales[m]
                clipped = bool(np.nanmax(np.abs(a)) > scale) if a.size else False
                note = (
                    "shared scale: " + ", ".join(by_id[o].label for o in maps if legends[o].group == lg.group)
                    if shared and sum(legends[o].group == lg.group for o in maps) > 1
                    else ""
                )
                legend_html = colorbar_html(
                    lg.signed,
                    scale,
                    lg.units,
                    lg.meaning,
                    value_range=(float(np.nanmin(a)), float(np.nanmax(a))) if a.size else None,
                    clipped=clipped,
                    note=note,
                )
                secs = f"{e.seconds:.2f} s" if e.seconds >= 0.01 else "<0.01 s"
                caption = (
                    f"target {info.classes[int(e.targets[i])]} · {secs}"
                    + (f" for {len(e)} inputs" if len(e) > 1 else "")
                    + (" · cached" if r.cached else "")
                )
                if bundle.modality == "image":

                    def draw(upscale: int, m: str = m, a: Any = a, scale: float = scale, x: Any = p.raw) -> Image.Image:
                        if display == "overlay":
                            return overlay(
                                greyscale(x),
                                a,
                                signed=legends[m].signed,
                                scale=scale,
                                alpha=OVERLAY_ALPHA,
                                upscale=upscale,
                            )
                        return heatmap(a, signed=legends[m].signed, scale=scale, upscale=upscale)

                    img = draw(DEFAULT_UPSCALE)
                    cbar = colorbar(
                        lg.signed,
                        scale,
                        width=max(img.width, 320),
                        height=40,
                        label=lg.units,
                        font_size=14,
                        clipped=clipped,
                    )
                    figures[(i, m)] = with_legend(img, cbar)
                    map_card(
                        by_id[m].label,
                        img,
                        legend_html,
                        caption,
                        large=draw(LARGE_UPSCALE),
                        key=f"explain_card_{i}_{m}",
                    )
                else:
                    tokens = highlight_tokens((e.tokens or [[]])[i], a, scale=scale, signed=lg.signed)
                    map_card(
                        by_id[m].label, None, legend_html, caption, tokens_html=tokens, key=f"explain_card_{i}_{m}"
                    )
        # One metrics table for this input, and the diagnostics behind a details panel.
        metric_values = {
            by_id[m].label: {k: v[i] for k, v in r.metrics.items() if k in METRICS and i < len(v)}
            for m, r in results.items()
            if r.explanation is not None
        }
        if with_metrics and any(metric_values.values()):
            st.dataframe(metrics_table(metric_values, METRICS), width="stretch", key=f"explain_metrics_table_{i}")
            st.caption(
                f"↑ higher is better, ↓ lower is better, {BEST} best of these methods for this input. Deletion / insertion AUC: "
                f"the target's probability as the most relevant pixels are removed / added ({CURVE_STEPS} steps)."
            )
        diagnostics = {
            by_id[m].label: {k: v[i] for k, v in e.diagnostics.items() if i < len(v)} for m, e in done.items()
        }
        notes = {
            by_id[m].label: [f"{name}: not computed ({msg})" for name, msg in r.metric_errors.items()]
            for m, r in results.items()
            if r.metric_errors
        }
        if any(diagnostics.values()) or notes:
            with st.expander("Details: diagnostics", icon=":material/info:"):
                st.dataframe(diagnostics_table(diagnostics, notes), hide_index=True, width="stretch")


# ---- downloads ---------------------------------------------------------------------------------
def npy_bytes(e: Explanation) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.stack([e.item(i) for i in range(len(e))]))
    return buf.getvalue()


def text_scores_json(e: Explanation) -> str:
    return json.dumps(
        [
            {"input": p.name, "words": (e.tokens or [[]])[i], "scores": [float(v) for v in e.item(i)]}
            for i, p in enumerate(inputs)
        ],
        indent=2,
    )


def overlays_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for i, p in enumerate(inputs):
            z.writestr(f"input_{i:02d}.png", png_bytes(to_pil(p.raw, 224)))
        for (i, m), img in figures.items():
            z.writestr(f"input_{i:02d}_{m}.png", png_bytes(img))
    return buf.getvalue()


def report_json() -> str:
    def clean(v: Any) -> Any:
        return None if isinstance(v, float) and not np.isfinite(v) else v

    report = {
        "run": run.id,
        "model": bundle.spec.name,
        "dataset": info.name,
        "device": str(bundle.device),
        "target": target_name,
        "colour_scale": SCALE_MODES[scale_mode],
        "inputs": [
            {
                "name": p.name,
                "true_label": info.classes[p.label] if p.label is not None else None,
                "predictions": [
                    {"class": info.classes[k], "probability": float(probs[i, k])} for k in np.argsort(-probs[i])[:TOP_K]
                ],
                "out_of_distribution": (
                    {
                        "flagged": ood_figures[i].flagged,
                        "knn_distance": ood_figures[i].distance,
                        "threshold": ood_figures[i].threshold,
                        "entropy": ood_figures[i].entropy,
                    }
                    if ood_figures
                    else None
                ),
            }
            for i, p in enumerate(inputs)
        ],
        "methods": [
            {
                **r.explanation.summary(),
                "units": legends[m].units,
                "metrics": {k: [clean(x) for x in v] for k, v in r.metrics.items()},
                "metric_errors": r.metric_errors,
            }
            if r.explanation is not None
            else {"method": m, "error": str(r.error)}
            for m, r in results.items()
        ],
    }
    return json.dumps(report, indent=2, default=str)


def all_zip() -> bytes:
    """Everything in one file: the inputs, each map with its colour bar (images), the raw attributions
    (.npy per method, or .json of word scores) and the report."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        if bundle.modality == "image":
            for i, p in enumerate(inputs):
                z.writestr(f"input_{i:02d}.png", png_bytes(to_pil(p.raw, 224)))
            for (i, m), img in figures.items():
                z.writestr(f"input_{i:02d}_{m}.png", png_bytes(img))
        for m, r in results.items():
            if r.explanation is None:
                continue
            if bundle.modality == "image":
                z.writestr(f"{m}.npy", npy_bytes(r.explanation))
            else:
                z.writestr(f"{m}.json", text_scores_json(r.explanation))
        z.writestr("explanations.json", report_json())
    return buf.getvalue()


finished = [(m, r.explanation) for m, r in results.items() if r.explanation is not None]
downloads = st.container(horizontal=True, vertical_alignment="top")
downloads.download_button(
    "Download all (.zip)",
    data=all_zip,
    file_name="explanations.zip",
    mime="application/zip",
    key="dl_all",
    on_click="ignore",
    type="primary",
    icon=":material/download:",
    help="inputs, every map with its colour bar (PNG), the attributions and the report",
)
with downloads.expander("Downloads: single files", icon=":material/download:"):
    cols = st.columns(max(1, min(4, len(finished))))
    for j, (m, e) in enumerate(finished):
        if bundle.modality == "image":
            cols[j % len(cols)].download_button(
                f"{by_id[m].label} (.npy)",
                data=functools.partial(npy_bytes, e),
                file_name=f"{m}.npy",
                mime="application/octet-stream",
                key=f"dl_npy_{m}",
                on_click="ignore",
                help="attributions, one (H, W) map per input, stacked",
            )
        else:
            cols[j % len(cols)].download_button(
                f"{by_id[m].label} (.json)",
                data=functools.partial(text_scores_json, e),
                file_name=f"{m}.json",
                mime="application/json",
                key=f"dl_json_{m}",
                on_click="ignore",
                help="one score per word",
            )
    c1, c2 = st.columns(2)
    if figures:
        c1.download_button(
            "Maps (.zip of PNGs with colour bars)",
            data=overlays_zip,
            file_name="overlays.zip",
            mime="application/zip",
            key="dl_zip",
            on_click="ignore",
        )
    c2.download_button(
        "Report (.json): predictions, parameters, timings, metrics",
        data=report_json,
        file_name="explanations.json",
        mime="application/json",
        key="dl_report",
        on_click="ignore",
    )
