"""Pages are listed once: `dashboard/nav.py`'s `PAGES` registry, which navigation, Home and the run picker read and
every link takes its path from (`page_path`). Each page declares its sidebar section and the kinds of run it can
use."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from xaidash.dashboard import nav

DASHBOARD = Path(nav.__file__).resolve().parent
VIEW_FILES = {p.name for p in nav.VIEWS.glob("*.py") if p.name != "__init__.py"}


def test_every_view_is_in_the_table_once_and_every_entry_exists() -> None:
    files = [p.file for p in nav.PAGES]
    assert sorted(files) == sorted(VIEW_FILES)
    for field in ("name", "file", "url_path", "title"):
        values = [getattr(p, field) for p in nav.PAGES]
        assert len(values) == len(set(values)), field
    for p in nav.PAGES:
        assert (nav.VIEWS / p.file).is_file(), p


def test_page_path_is_what_streamlit_takes() -> None:
    for p in nav.PAGES:
        path = nav.page_path(p.name)
        assert (DASHBOARD / path).resolve() == (nav.VIEWS / p.file).resolve()
    with pytest.raises(KeyError):
        nav.page_path("no_such_page")


def test_navigation_is_built_from_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[tuple[Path, dict]] = []
    monkeypatch.setattr(nav.st, "Page", lambda page, **kw: made.append((Path(page), kw)) or Path(page).name)
    grouped = nav.build_pages()
    order = nav.in_menu_order()
    assert [(path.name, kw["title"], kw["icon"], kw["url_path"]) for path, kw in made] == [
        (p.file, p.title, p.icon, p.url_path) for p in order
    ]
    assert [kw["default"] for _, kw in made] == [True] + [False] * (len(nav.PAGES) - 1)
    assert order[0].name == "home"
    # Sections in menu order, Home alone on top (no heading), each section's pages in registration order.
    assert list(grouped) == list(nav.SECTIONS)
    assert grouped == {s: [p.file for p in nav.PAGES if p.section == s] for s in nav.SECTIONS}
    assert grouped[nav.TOP] == ["home.py"]


def test_pages_are_grouped_by_task() -> None:
    titles = {s: [p.title for p in nav.in_menu_order() if p.section == s] for s in nav.SECTIONS}
    assert titles == {
        "": ["Home"],
        "Train and import": ["Train", "Import"],
        "Explain and compare": ["Explain", "Generate", "Side by side", "Compare", "Scenes", "Global view"],
        "Inside the model": [
            "Attention",
            "Features",
            "Steer & patch",
            "Receptive fields",
            "Recurrent",
            "Embeddings",
            "Model",
        ],
        "Training data and concepts": ["Training data", "Concepts"],
    }


def test_each_page_declares_the_runs_it_can_use() -> None:
    from xaidash.dashboard.state import page_runs, slot_of

    runs = {p.name: p.runs for p in nav.PAGES}
    assert runs["generate"] == runs["features"] == runs["steer_patch"] == ("language_model",)
    assert set(runs["attention"]) == set(runs["embeddings"]) == {"trained", "imported", "language_model"}
    assert runs["scenes"] == ("scene_model",)  # detectors and segmenters: no other page offers them
    others = set(runs) - {"generate", "features", "steer_patch", "attention", "embeddings", "scenes"}
    assert all(runs[name] == ("trained", "imported") for name in others)
    assert [slot_of(page_runs(n)) for n in ("explain", "generate", "attention", "scenes", None)] == [
        "classifier",
        "language",
        "any",
        "scene",
        "classifier",
    ]


def test_a_page_must_name_a_known_section_and_run_kinds() -> None:
    with pytest.raises(ValueError, match="section"):
        nav.PAGES.register(nav.PageInfo("x", "x.py", "X", ":material/home:", "x", "Elsewhere"))
    with pytest.raises(ValueError, match="runs"):
        nav.PAGES.register(nav.PageInfo("x", "x.py", "X", ":material/home:", "x", nav.TRAIN, runs=()))
    assert nav.PAGES.find("x") is None


def test_no_page_path_is_written_out_elsewhere() -> None:
    pattern = re.compile(r"""["'][^"'\n]*views/[A-Za-z_]+\.py["']""")
    found = []
    for path in sorted(DASHBOARD.rglob("*.py")):
        if path == DASHBOARD / "nav.py":
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line):
                found.append(f"{path.relative_to(DASHBOARD)}:{i}: {line.strip()}")
    assert not found, "page paths written out by hand (use nav.page_path):\n" + "\n".join(found)


def _run(model: str, **config: object) -> str:
    import time

    from xaidash.models.runs.store import Run

    run = Run.create(str(config.get("dataset") or "none"), model)
    run.write_config({"model": model, "dataset": None, "created": time.time(), **config})
    return run.id


def test_the_run_picker_offers_the_runs_a_page_can_use() -> None:
    """Classifier pages list trained and imported classifiers, Generate language models, Attention both."""
    from app_pages import make_app, open_page

    from xaidash.dashboard.components.run_picker import PICKER_KEY

    _run("mlp", dataset="digits", classes=[str(i) for i in range(10)])
    _run("mine", modality="image", source={"kind": "torchscript", "record": {}})
    _run("smol", language_model={"architecture": "llama", "layers": 2, "heads": 2})
    offered = {}
    for page in ("home", "generate", "attention"):
        at = open_page(make_app(), nav.page_path(page))
        offered[page] = set(at.sidebar.selectbox(key=PICKER_KEY).options)
    assert len(offered["attention"]) == 3
    assert len(offered["home"]) == 2 and all("language model" not in o for o in offered["home"])
    assert any("imported" in o for o in offered["home"])
    assert len(offered["generate"]) == 1 and all("language model" in o for o in offered["generate"])
    assert offered["home"] | offered["generate"] == offered["attention"]
