"""Explain's "Training samples behind this prediction" panel, one per input: the training samples that most support
and most oppose the prediction (TracIn over the run's checkpoints, or what applies to the run), as two galleries.

Closed by default and computed on request (the first query computes the training gradients, then they are cached
under the run); a result is kept per run, input, method and target, so reopening the page draws it at once. Each
sample links to itself on Explain (`?sample=train:N`)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import streamlit as st
import torch

from xaidash.dashboard import services
from xaidash.dashboard.components.images import to_pil
from xaidash.dashboard.components.model_queue import leased_model
from xaidash.dashboard.components.session_results import record_result
from xaidash.dashboard.errors import show_error
from xaidash.dashboard.nav import page_path
from xaidash.dashboard.state import selected_run
from xaidash.data.modalities import modality_of
from xaidash.data.registry import Split
from xaidash.explainers.figures.report import ExplainReport
from xaidash.explainers.influence.api import InfluenceResult, TrainingSample, explain_influence
from xaidash.explainers.influence.registry import InfluenceMethodSpec, influence_methods_for
from xaidash.explainers.session_extras import influence_extra
from xaidash.models.bundle import ModelBundle
from xaidash.models.runs.store import Run

TITLE = "Training samples behind this prediction"
K = 8  # samples per gallery
TEXT_CHARS = 160  # a training text is cut to this many characters in its card


@st.cache_resource(show_spinner=False)
def influence_cache() -> services.LRUCache:
    """(run weights, input, method, target) -> InfluenceResult."""
    return services.LRUCache(64)


def _pick_method(run: Run, key: str) -> InfluenceMethodSpec | None:
    """The method selectbox (methods that apply to the run, the featured first) and a line naming the others with
    their reason; None with a message when none applies."""
    pairs = influence_methods_for(run)
    usable = sorted((m for m, why in pairs if why is None), key=lambda m: (m.featured is None, m.featured or 0))
    skipped = [(m, why) for m, why in pairs if why is not None]
    if skipped:
        st.caption(
            "Not available for this run: " + "; ".join(f"{m.label} ({str(why).rstrip('.')})" for m, why in skipped)
        )
    if not usable:
        st.info("No training-data method applies to this run (reasons above).", icon=":material/info:")
        return None
    return method_select(usable, f"{key}_method")


def method_select(usable: list[InfluenceMethodSpec], key: str) -> InfluenceMethodSpec:
    """The selectbox of the influence methods `usable` (in that order), each described in its help."""
    by_id = {m.id: m for m in usable}
    chosen = st.selectbox(
        "Method",
        list(by_id),
        format_func=lambda i: by_id[i].label,
        key=key,
        help=" ".join(f"{m.label}: {m.description}" for m in usable),
    )
    return by_id[str(chosen)]


def _class(classes: tuple[str, ...], k: int) -> str:
    return classes[k] if 0 <= k < len(classes) else f"class {k}"


def sample_caption(s: TrainingSample, classes: tuple[str, ...]) -> tuple[str, str]:
    """(the score, in bold; the label it was trained with, "flipped from" what the data set says when they differ,
    and the final model's prediction with its probability, ✓ when it matches the label)."""
    label = f"label {_class(classes, s.label)}"
    if s.dataset_label != s.label:
        label += f" (flipped from {_class(classes, s.dataset_label)})"
    mark = "✓" if s.predicted == s.label else "✗"
    return f"score **{s.score:+.3g}**", f"{label} · predicted {_class(classes, s.predicted)} {s.probability:.0%} {mark}"


def _link(run: Run, index: int) -> None:
    st.page_link(
        page_path("explain"),
        label=f"train #{index}",  # no icon: a 5-digit index must fit the card
        query_params={"sample": f"train:{index}", "run": run.id},
        help="open this training sample on Explain",
    )


def _gallery(title: str, caption: str, samples: list[TrainingSample], split: Split | None, run: Run) -> None:
    classes = tuple(run.info.classes)
    st.markdown(f"**{title}**")
    st.caption(caption)
    if not samples:
        st.caption("None found.")
        return
    adapter = modality_of(run.info.modality)
    width = 128 if adapter.pictured or split is None else 240
    with st.container(horizontal=True, gap="small"):
        for s in samples:
            with st.container(width=width, border=True, gap="small"):
                if split is not None and adapter.pictured:
                    st.image(to_pil(adapter.item(split, s.index), 96), width="stretch")
                elif split is not None:
                    st.markdown(f"> {adapter.one_line(adapter.item(split, s.index), run.info, TEXT_CHARS)}")
                _link(run, s.index)
                score, facts = sample_caption(s, classes)
                st.markdown(score)
                st.caption(facts)


def _header(result: InfluenceResult, classes: tuple[str, ...]) -> None:
    epochs = ", ".join(str(e) for e in result.checkpoints) or "the final weights"
    plural = "s" if len(result.checkpoints) > 1 else ""
    st.markdown(
        f"**{result.label}** for class **{_class(classes, result.target)}** · checkpoint{plural}: epoch{plural} "
        f"{epochs} · layer: {result.layer} · score units: {result.units} · {result.seconds:.1f} s"
    )
    for note in result.notes:
        st.caption(note)


def _compute(
    bkey: str, bundle: ModelBundle, run: Run, raw: torch.Tensor | str, target: int | None, method: str
) -> Callable[[], InfluenceResult]:
    def work() -> InfluenceResult:
        bar = st.progress(0.0, text="Finding the training samples…")

        def progress(fraction: float, text: str) -> None:
            bar.progress(min(max(float(fraction), 0.0), 1.0), text=text)

        try:
            with leased_model(bkey, bundle) as replica:
                return explain_influence(replica, run, raw, target=target, method=method, k=K, progress=progress)
        finally:
            bar.empty()

    return work


def influence_panel(report: ExplainReport, i: int, target: int | None) -> None:
    """The panel for input `i` of Explain's report; `target`: the page's chosen class (None: the predicted one)."""
    with st.expander(TITLE, icon=":material/groups:", key=f"influence_panel_{i}"):
        run = selected_run()
        if run is None or not report.runs or run.id != report.runs[0].id:
            st.info("Pick the run on the Train page to see its training samples.")
            return
        try:
            bundle = services.bundle_for(run)
            kept = report.inputs[i].raw(*bundle.info.input_shape[:1])  # channels; a text model has no input shape
            raw = torch.from_numpy(kept) if isinstance(kept, np.ndarray) else kept
            if raw is None:
                st.info("This input cannot be traced back to training samples (no image or text kept).")
                return
            key = f"influence_{i}"
            spec = _pick_method(run, key)
            if spec is None:
                return
            classes = tuple(report.run.classes)
            predicted = report.inputs[i].predictions["A"][0].cls if report.inputs[i].predictions.get("A") else None
            shown = target if target is not None else predicted
            whose = "the class chosen above" if target is not None else "the predicted class"
            st.caption(
                f"Target: **{_class(classes, shown) if shown is not None else '?'}** ({whose}; change it with "
                "Target class above). " + spec.description
            )
            bkey = services.run_key(run)
            cache_key = (bkey, services.content_key(raw), spec.id, target)
            result: InfluenceResult | None = influence_cache().get(cache_key)
            if result is None:
                ask = st.empty()  # the request, replaced by the result once computed
                with ask.container():
                    st.caption(
                        "Computed on request: the first query of a run computes every training sample's gradients "
                        "once (cached under the run); later queries take a moment."
                    )
                    go = st.button("Find training samples", key=f"{key}_go", icon=":material/manage_search:")
                if not go:
                    return
                ask.empty()
                result = influence_cache().get_or_compute(cache_key, _compute(bkey, bundle, run, raw, target, spec.id))[
                    0
                ]
        except Exception as e:  # noqa: BLE001 - one panel failing must not hide the maps above
            show_error(e, "Training samples")
            return
        done, split = result, _train_split(run)  # cached: _draw reads the same split
        record_result(i, "training_samples", lambda: influence_extra(i, done, classes, split))
        _draw(result, run)


def _train_split(run: Run) -> Split | None:
    try:
        return services.dataset_split(run.info.name, "train")
    except Exception:  # noqa: BLE001 - the report's table still lists indices, scores and labels
        return None


def _draw(result: InfluenceResult, run: Run) -> None:
    classes = tuple(run.info.classes)
    _header(result, classes)
    try:
        split: Split | None = services.dataset_split(run.info.name, "train")
    except Exception:  # noqa: BLE001 - the cards still show index, scores and labels
        split = None
        st.caption("The training data is not readable here: the cards show indices, scores and labels only.")
    c1, c2 = st.columns(2, gap="medium")
    with c1:
        _gallery(
            "Supporting",
            f"pushed the model towards {_class(classes, result.target)}: highest positive score first",
            result.proponents,
            split,
            run,
        )
    with c2:
        _gallery(
            "Opposing",
            f"pushed the model away from {_class(classes, result.target)}: most negative score first",
            result.opponents,
            split,
            run,
        )
    st.caption(
        "A score is how much training on that sample moved this prediction's loss, summed over the checkpoints "
        "(larger = more influence). It says which samples taught the model this; it does not prove the model is right, "
        "and a flipped label among the supporting samples is a hint of a labelling problem, not a proof."
    )
