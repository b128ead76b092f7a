"""The runs a session works with, kept in `st.session_state` so every page sees the same ones.

A session holds three: a classifier (every page that explains predictions), a generative language model (the
Generate page) and a detector or segmenter (a scene model: the Scenes page). The Attention and Embeddings pages show whichever of the two was picked last. Which runs a page can
use it declares itself (`nav.PageInfo.runs`, read by `page_runs(name)`); picking a run (`select_run`) files it under
its kind, so a classifier page never falls on a language model, nor the Generate page on a classifier."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Literal

import streamlit as st

from xaidash.dashboard.components.scene_facts import scene_label
from xaidash.dashboard.nav import CLASSIFIERS, LANGUAGE_MODELS, PAGES, SCENE_RUNS, page_path
from xaidash.dashboard.run_facts import run_kind
from xaidash.data.formatting import percent
from xaidash.models.runs.scores import headline_text
from xaidash.models.runs.store import Run, RunKind, list_runs, run_liveness

if TYPE_CHECKING:
    from xaidash.models.bundle import ModelBundle

RUN_KEY = "xai_selected_run"  # the classifier run
LM_KEY = "xai_selected_lm"  # the language-model run
SCENE_KEY = "xai_selected_scene"  # the scene run (a detector or segmenter)
# A scene run picked last (in a runs table, or when its training ended): the runs tables focus it rather than the
# classifier; picking a classifier clears it.
SCENE_FOCUS_KEY = "xai_scene_focus"
LAST_KIND_KEY = "xai_last_kind"  # the kind picked last ("classifier" or "language"): what Attention and Embeddings show
MISSING_KEY = "xai_missing_run"  # a `?run=` link's run that does not exist, until the user picks a run
ELSEWHERE_KEY = "xai_link_elsewhere"  # a `?run=` link's run of a kind the page it opened cannot use
# The session's run a page works on: its classifier, its language model, either (the one picked last), or its scene
# model.
Slot = Literal["classifier", "language", "any", "scene"]


def page_runs(page: str | None) -> tuple[RunKind, ...]:
    """The kinds of run a page can use, as it declares them (classifiers outside a page run)."""
    info = PAGES.find(page) if page else None
    return info.runs if info is not None else CLASSIFIERS


def page_opens(page: str | None) -> tuple[RunKind, ...]:
    """The kinds of run a `?run=` link may open on a page: those it uses, and those a view of it works on."""
    info = PAGES.find(page) if page else None
    return page_runs(page) + (info.opens if info is not None else ())


def slot_of(runs: tuple[RunKind, ...]) -> Slot:
    """The session's run a page that uses `runs` works on: its language model when it uses only those, either
    (the one picked last) when it uses both kinds, else its classifier."""
    if runs and set(runs) <= set(SCENE_RUNS):
        return "scene"
    language = set(runs) & set(LANGUAGE_MODELS)
    if not language:
        return "classifier"
    return "language" if set(runs) == language else "any"


def runs_for(runs: tuple[RunKind, ...]) -> list[Run]:
    """The runs of those kinds, newest first. A run whose config.json cannot be read is listed with the
    classifiers (picking it says why it cannot be used, and the runs tables offer to delete it)."""
    return [r for r in list_runs() if (run_kind(r) or "trained") in runs]


def current_page() -> str | None:
    """The `nav.PAGES` name of the page this script run draws (None outside a page run). Streamlit has no public
    call for it: its navigation names each page by a hash of its URL path, which this compares."""
    try:
        from streamlit.runtime.scriptrunner import get_script_run_ctx
        from streamlit.util import calc_hash

        ctx = get_script_run_ctx()
        current = ctx.page_script_hash if ctx is not None else None
    except (ImportError, AttributeError):
        return None
    return next((p.name for p in PAGES if current and calc_hash(p.url_path) == current), None)


def _find(run_id: str | None) -> Run | None:
    return next((r for r in list_runs() if r.id == run_id), None) if run_id else None


def select_run(run_id: str | None) -> None:
    """Pick a run for every page of its kind (a language model for Generate, a classifier for the others)."""
    run = _find(run_id)
    kind = run_kind(run) if run is not None else None
    if kind == "language_model":
        st.session_state[LM_KEY] = run_id
        st.session_state[LAST_KIND_KEY] = "language"
    elif kind in SCENE_RUNS:
        st.session_state[SCENE_KEY] = st.session_state[SCENE_FOCUS_KEY] = run_id
    else:
        st.session_state.pop(SCENE_FOCUS_KEY, None)
        st.session_state[RUN_KEY] = run_id
        if run_id is not None:
            st.session_state[LAST_KIND_KEY] = "classifier"
    st.session_state.pop(MISSING_KEY, None)  # the user chose: the refused link is history
    st.session_state.pop(ELSEWHERE_KEY, None)


def _selected_of(kind: Literal["classifier", "language", "scene"]) -> Run | None:
    kinds = {"language": LANGUAGE_MODELS, "scene": SCENE_RUNS}.get(kind, CLASSIFIERS)
    runs = runs_for(kinds)
    key = {"language": LM_KEY, "scene": SCENE_KEY}.get(kind, RUN_KEY)
    # A language model's id under RUN_KEY (a `?run=` link or a test that set the key itself) counts for it.
    wanted = [st.session_state.get(key)] + ([st.session_state.get(RUN_KEY)] if kind == "language" else [])
    for run_id in wanted:
        found = next((r for r in runs if run_id and r.id == run_id), None)
        if found is not None:
            return found
    for r in runs:  # as --run latest: not failed, not training, weights present and finite (Run.usable)
        if r.usable:
            st.session_state[key] = r.id  # not select_run: a refused link's notice stays
            return r
    return None


def selected_run(kind: Slot = "classifier") -> Run | None:
    """The run of `kind` this session picked; else the newest usable one (remembered); else None. "any": the
    kind picked last (the classifier when none was), else the other (never a scene model)."""
    if kind != "any":
        return _selected_of(kind)
    first: Literal["classifier", "language"] = (
        "language" if st.session_state.get(LAST_KIND_KEY) == "language" else "classifier"
    )
    found = _selected_of(first)
    return found if found is not None else _selected_of("classifier" if first == "language" else "language")


def apply_run_link() -> None:
    """A link with `?run=<id>` (Home's quick-start results) selects that run, then the parameter is dropped
    so the page's address does not pin the run. A run that does not exist, or one of a kind this page cannot use, is
    remembered for `run_picker.run_link_notice` to say (once, on the page, until the user picks a run)."""
    wanted = st.query_params.get("run")
    if not wanted:
        return
    del st.query_params["run"]
    found = _find(wanted)  # only a run listed under the runs root: never a path
    if found is None:
        st.session_state[MISSING_KEY] = str(wanted)
        return
    select_run(wanted)
    if (run_kind(found) or "trained") not in page_opens(current_page()):  # filed for its own pages: say where
        st.session_state[ELSEWHERE_KEY] = wanted


def missing_run_notice(short: bool = False) -> str | None:
    """What to say after a `?run=` link named a run that does not exist: that, and which run is shown instead
    (None when no link was refused, or since the user picked a run). `short`: for the sidebar, under the picker
    that shows the run."""
    wanted = st.session_state.get(MISSING_KEY)
    if not wanted:
        return None
    shown = selected_run()
    name = str(wanted).replace("`", "'")
    name = name if len(name) <= 80 else name[:79] + "…"
    if short:
        return f"The link's run `{name}` does not exist: " + ("showing this run instead." if shown else "no run yet.")
    instead = f"Showing run `{shown.id}` ({run_label(shown)}) instead." if shown else "No other run to show yet."
    return f"The link asked for run `{name}`, which does not exist. {instead}"


def run_label(run: Run) -> str:
    """'resnet_small on shapes · test acc 91.0% · 2026-11-02 10:04' (or why the run is unreadable)."""
    try:
        c, s = run.config(), run.summary()
    except Exception as e:  # noqa: BLE001 - a damaged run must still be listed (and deletable)
        return f"{run.id} (unreadable: {e})"
    acc = s.get("test_acc", s.get("val_acc"))
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(c.get("created", 0)))
    state = run_liveness(run, s).state  # 'interrupted' when the process that wrote 'running' is gone
    kind = run.kind
    if kind == "language_model":
        return f"{c['model']} · generative language model · {when}"
    if kind in SCENE_RUNS:
        return f"{scene_label(run)} · {when}" + ("" if state == "completed" else f" · {state}")
    if kind == "imported":  # no accuracy measured here, maybe no data set
        return f"{c['model']} on {c.get('dataset') or 'no data set'} · imported · {when}"
    extra = "" if state == "completed" else f" · {state}"
    score = headline_text(s) if s.get("test_r2") is not None or s.get("val_r2") is not None else f"acc {percent(acc)}"
    return f"{c['model']} on {c['dataset']} · {score} · {when}{extra}"


def require_bundle(purpose: str) -> tuple[Run, ModelBundle]:
    """The selected run and its loaded model, or a message with what to do and st.stop().

    Every page that works on a model starts here, so a missing run or one that cannot be loaded
    (no weights yet, damaged files) reads the same everywhere instead of a traceback, and a model too
    poor to explain is flagged the same way everywhere.
    """
    from xaidash.dashboard import services
    from xaidash.dashboard.components.quality import show_run_warning
    from xaidash.dashboard.errors import show_error

    run = selected_run()
    if run is None:
        st.info(
            f"No run to {purpose} yet: train a model first (or select a run on the Train page).", icon=":material/info:"
        )
        st.page_link(page_path("train"), label="Go to Train", icon=":material/model_training:")
        st.stop()
    try:
        with st.spinner("Loading the model…"):
            bundle = services.bundle_for(run)
    except Exception as e:  # noqa: BLE001  (shown with its cause; the app keeps running)
        show_error(e, f"Could not load run {run.id}")
        st.info("Pick another run on the Train page.")
        st.stop()
    show_run_warning(run)
    st.session_state[LAST_KIND_KEY] = "classifier"  # the Attention page follows the kind worked with last
    return run, bundle
