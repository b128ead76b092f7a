"""The app's pages, in one place: `PAGES` is the one table of them. Navigation (`build_pages`) and Home's list
read it, and every link or switch to a page takes its path from `page_path(name)`; a new page is its view file
and one `PageInfo` line here."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import streamlit as st

VIEWS = Path(__file__).resolve().parent / "views"


@dataclass(frozen=True)
class PageInfo:
    """name: the key `page_path` takes; file: the view in `views/`; blurb: Home's line about it ("" when Home
    links to the page elsewhere, in its steps)."""

    name: str
    file: str
    title: str
    icon: str
    url_path: str
    blurb: str = ""


# Menu order; the first is the default page.
PAGES: tuple[PageInfo, ...] = (
    PageInfo("home", "home.py", "Home", ":material/home:", "home"),
    PageInfo("train", "train.py", "Train", ":material/model_training:", "train"),
    PageInfo(
        "import",
        "import_model.py",
        "Import",
        ":material/upload:",
        "import",
        "bring your own PyTorch or Hugging Face model",
    ),
    PageInfo("explain", "explain.py", "Explain", ":material/image_search:", "explain"),
    PageInfo(
        "generate",
        "generate.py",
        "Generate",
        ":material/chat:",
        "generate",
        "ask a language model (SmolLM2) and see which words of the prompt produced each word of its answer",
    ),
    PageInfo(
        "side_by_side",
        "side_by_side.py",
        "Side by side",
        ":material/compare:",
        "side-by-side",
        "two models' predictions and maps for the same inputs, row by row",
    ),
    PageInfo("compare", "compare.py", "Compare", ":material/leaderboard:", "compare"),
    PageInfo(
        "attention",
        "attention.py",
        "Attention",
        ":material/visibility:",
        "attention",
        "every layer and head of a transformer, head and model view",
    ),
    PageInfo(
        "receptive_fields",
        "receptive_fields.py",
        "Receptive fields",
        ":material/filter_center_focus:",
        "receptive-fields",
        "which pixels a unit can see, and which it actually uses",
    ),
    PageInfo(
        "embeddings",
        "embeddings.py",
        "Embeddings",
        ":material/scatter_plot:",
        "embeddings",
        "the test set in the model's feature space (PCA, t-SNE, UMAP)",
    ),
    PageInfo(
        "training_data",
        "training_data.py",
        "Training data",
        ":material/fact_check:",
        "training-data",
        "the training samples the model found hardest (possible label errors): flag them, download the list",
    ),
    PageInfo(
        "concepts",
        "concepts.py",
        "Concepts",
        ":material/lightbulb:",
        "concepts",
        "TCAV: does a class use a concept you show with examples? (significance-tested)",
    ),
    PageInfo(
        "model",
        "model.py",
        "Model",
        ":material/account_tree:",
        "model",
        "architecture, feature maps, filters, explanations across training",
    ),
)


def page_info(name: str) -> PageInfo:
    for p in PAGES:
        if p.name == name:
            return p
    raise KeyError(f"no page {name!r}; pages: {', '.join(p.name for p in PAGES)}")


def page_path(name: str) -> str:
    """The page's path as `st.page_link`, `st.switch_page` and AppTest take it (relative to `app.py`)."""
    return f"{VIEWS.name}/{page_info(name).file}"


def build_pages() -> list[st.Page]:
    """Every page of the app, in menu order (the first is the default)."""
    return [
        st.Page(VIEWS / p.file, title=p.title, icon=p.icon, url_path=p.url_path, default=i == 0)
        for i, p in enumerate(PAGES)
    ]
