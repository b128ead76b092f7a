"""The app's pages, in one place: `PAGES` is the one registry of them. Navigation (`build_pages`), Home's list and
the run picker read it, and every link or switch to a page takes its path from `page_path(name)`; a new page is its
view file and one `PageInfo` entry here.

Each page declares the section of the sidebar it is listed under (what it is for) and which kinds of run it can
use (`Run.kind`: classifiers trained here or imported, generative language models, or both), so the run picker
offers a page only the runs it can work on."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import streamlit as st

from xaidash.data.specs import Registry, Spec
from xaidash.models.runs.store import RunKind

VIEWS = Path(__file__).resolve().parent / "views"

# The sidebar's sections, in menu order; "" is the top of the menu, above every heading (Home).
TOP = ""
TRAIN = "Train and import"
EXPLAIN = "Explain and compare"
INSIDE = "Inside the model"
DATA = "Training data and concepts"
SECTIONS = (TOP, TRAIN, EXPLAIN, INSIDE, DATA)

# The kinds of run a page can use.
CLASSIFIERS: tuple[RunKind, ...] = ("trained", "imported")
LANGUAGE_MODELS: tuple[RunKind, ...] = ("language_model",)
EVERY_RUN: tuple[RunKind, ...] = CLASSIFIERS + LANGUAGE_MODELS
# Detectors and segmenters (issue 34): only the pages that declare them offer them, never a classifier page.
SCENE_RUNS: tuple[RunKind, ...] = ("scene_model",)
KNOWN_RUNS: tuple[RunKind, ...] = EVERY_RUN + SCENE_RUNS  # what a page may declare


@dataclass(frozen=True)
class PageInfo(Spec):
    """name: the key `page_path` takes; file: the view in `views/`; section: the sidebar's heading it is listed
    under (one of `SECTIONS`); runs: the kinds of run it can use (the run picker lists those only); blurb: Home's
    line about it ("" when Home links to the page elsewhere, in its steps); opens: kinds a `?run=` link may name
    besides `runs`, which a view of the page works on with its own picker (Train's scene tab; Compare's and Side by
    side's scene view)."""

    name: str
    file: str
    title: str
    icon: str
    url_path: str
    section: str
    runs: tuple[RunKind, ...] = CLASSIFIERS
    blurb: str = ""
    opens: tuple[RunKind, ...] = ()

    @property
    def label(self) -> str:
        return self.title


def _check(page: PageInfo) -> None:
    if page.section not in SECTIONS:
        raise ValueError(f"page {page.name!r}: section {page.section!r} is not one of {SECTIONS}")
    if not page.runs or not set(page.runs) | set(page.opens) <= set(KNOWN_RUNS):
        raise ValueError(f"page {page.name!r}: runs {page.runs + page.opens!r} must be some of {KNOWN_RUNS}")


def _unknown(key: object, known: list[str]) -> str:
    return f"no page {key!r}; pages: {', '.join(known)}"


# Menu order within each section is registration order; the first page is the default.
PAGES: Registry[PageInfo] = Registry("page", keys=lambda p: (p.name,), error=KeyError, unknown=_unknown, check=_check)
for _page in (
    PageInfo("home", "home.py", "Home", ":material/home:", "home", TOP),
    PageInfo("train", "train.py", "Train", ":material/model_training:", "train", TRAIN, opens=SCENE_RUNS),
    PageInfo(
        "import",
        "import_model.py",
        "Import",
        ":material/upload:",
        "import",
        TRAIN,
        blurb="bring your own PyTorch or Hugging Face model",
    ),
    PageInfo("explain", "explain.py", "Explain", ":material/image_search:", "explain", EXPLAIN),
    PageInfo(
        "generate",
        "generate.py",
        "Generate",
        ":material/chat:",
        "generate",
        EXPLAIN,
        runs=LANGUAGE_MODELS,
        blurb="ask a language model (SmolLM2) and see which words of the prompt produced each word of its answer",
    ),
    PageInfo(
        "side_by_side",
        "side_by_side.py",
        "Side by side",
        ":material/compare:",
        "side-by-side",
        EXPLAIN,
        blurb="two models' predictions and maps for the same inputs, row by row",
        opens=SCENE_RUNS,
    ),
    PageInfo("compare", "compare.py", "Compare", ":material/leaderboard:", "compare", EXPLAIN, opens=SCENE_RUNS),
    PageInfo(
        "scenes",
        "scenes.py",
        "Scenes",
        ":material/center_focus_strong:",
        "scenes",
        EXPLAIN,
        runs=SCENE_RUNS,
        blurb="a detector's boxes or a segmenter's regions explained one object at a time (Grad-CAM, D-RISE, IG, "
        "occlusion), each map scored against the object's true mask",
    ),
    PageInfo(
        "global_view",
        "global_view.py",
        "Global view",
        ":material/insights:",
        "global-view",
        EXPLAIN,
        blurb="a model of table rows over the whole table: permutation importance, partial dependence and ICE, "
        "global SHAP, a surrogate tree you can read and glassbox models beside it",
    ),
    PageInfo(
        "attention",
        "attention.py",
        "Attention",
        ":material/visibility:",
        "attention",
        INSIDE,
        runs=EVERY_RUN,
        blurb="every layer and head of a transformer, head and model view",
    ),
    PageInfo(
        "features",
        "features.py",
        "Features",
        ":material/category_search:",
        "features",
        INSIDE,
        runs=LANGUAGE_MODELS,
        blurb="a language model's features: sparse autoencoders trained behind Start, and a browser of what each "
        "feature fires on and writes",
    ),
    PageInfo(
        "steer_patch",
        "steer_patch.py",
        "Steer & patch",
        ":material/alt_route:",
        "steer-patch",
        INSIDE,
        runs=LANGUAGE_MODELS,
        blurb="which layers, positions, heads and MLPs of a language model carry its answer (activation patching), "
        "and its answer steered along a direction",
    ),
    PageInfo(
        "receptive_fields",
        "receptive_fields.py",
        "Receptive fields",
        ":material/filter_center_focus:",
        "receptive-fields",
        INSIDE,
        blurb="which pixels a unit can see, and which it actually uses",
    ),
    PageInfo(
        "recurrent",
        "recurrent.py",
        "Recurrent",
        ":material/cycle:",
        "recurrent",
        INSIDE,
        blurb="a GRU's or LSTM's hidden state over time (PCA) and its gates, for one series",
    ),
    PageInfo(
        "embeddings",
        "embeddings.py",
        "Embeddings",
        ":material/scatter_plot:",
        "embeddings",
        INSIDE,
        runs=EVERY_RUN,
        blurb="the test set in the model's feature space (PCA, t-SNE, UMAP)",
    ),
    PageInfo(
        "model",
        "model.py",
        "Model",
        ":material/account_tree:",
        "model",
        INSIDE,
        blurb="architecture, feature maps, filters, explanations across training",
    ),
    PageInfo(
        "training_data",
        "training_data.py",
        "Training data",
        ":material/fact_check:",
        "training-data",
        DATA,
        blurb="the training samples the model found hardest (possible label errors): flag them, download the list",
    ),
    PageInfo(
        "concepts",
        "concepts.py",
        "Concepts",
        ":material/lightbulb:",
        "concepts",
        DATA,
        blurb="TCAV: does a class use a concept you show with examples? (significance-tested)",
    ),
):
    PAGES.register(_page)


def page_info(name: str) -> PageInfo:
    """The page registered as `name`; KeyError naming the pages when there is none."""
    return PAGES.get(name)


def page_path(name: str) -> str:
    """The page's path as `st.page_link`, `st.switch_page` and AppTest take it (relative to `app.py`)."""
    return f"{VIEWS.name}/{page_info(name).file}"


def page_url(name: str, **params: object) -> str:
    """A link to the page with `params` in its address (relative to the app's root, as its pages' addresses are)."""
    query = urlencode(params)
    return f"{page_info(name).url_path}?{query}" if query else page_info(name).url_path


def page_for(kind: RunKind, near: str | None = None) -> PageInfo | None:
    """The page a run of `kind` opens on when the page `near` cannot use it: of the pages that can (Home aside), one
    in `near`'s section first, then in menu order (a language model near Explain: Generate; a classifier near
    Generate: Explain)."""
    here = PAGES.find(near) if near else None
    section = here.section if here is not None else None
    usable = [p for p in in_menu_order() if kind in p.runs and p.section != TOP]
    return next((p for p in usable if p.section == section), usable[0] if usable else None)


def in_menu_order() -> list[PageInfo]:
    """Every page as the sidebar lists it: section by section, each section's pages in registration order."""
    return sorted(PAGES, key=lambda p: SECTIONS.index(p.section))  # a stable sort: registration order within each


def build_pages() -> dict[str, list[st.Page]]:
    """Every page, grouped by section (section heading -> its pages, in menu order; the first page is the
    default), as `st.navigation` takes them."""
    first = in_menu_order()[0]
    grouped: dict[str, list[st.Page]] = {}
    for p in in_menu_order():
        page = st.Page(VIEWS / p.file, title=p.title, icon=p.icon, url_path=p.url_path, default=p is first)
        grouped.setdefault(p.section, []).append(page)
    return grouped
