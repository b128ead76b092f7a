"""The Import page and every other page on imported models, through streamlit's AppTest.

The Import page imports a Hugging Face folder by path and a model class with uploaded weights and labels, shows
the summary and opens the run on Explain; a folder that cannot be imported gets its reason and writes nothing.
On imported models with no data set, Explain and Attention work from uploads and typed text, and Compare,
Embeddings and the effective receptive field say in one line why they need a data set.
"""

from __future__ import annotations

import functools
import io
from pathlib import Path

import pytest
from app_pages import assert_ok, open_page, texts
from app_pages import make_app as _make_app
from imported_models import import_external, write_hf_vit, write_module
from streamlit.testing.v1 import AppTest

from xaidash.models.runs.store import list_runs

TIMEOUT = 180
make_app = functools.partial(_make_app, timeout=TIMEOUT)


def method_results(at: AppTest) -> list[str]:
    """The caption under each explained map ('target cat · 0.12 s ...')."""
    return [c for c in texts(at.caption) if c.startswith("target ")]


def click(at: AppTest, label: str) -> AppTest:
    found = [b for b in at.button if str(b.label) == label]
    assert found, f"no button {label!r}: {[b.label for b in at.button]}"
    found[0].click().run()
    assert_ok(at)
    return at


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A runs root with an imported HF ViT, an HF BERT classifier and a CNN class from a file: {'root', name: id}."""
    base = tmp_path_factory.mktemp("imported_pages")
    root = base / "runs"
    ids = {name: import_external(name, base / name, root).id for name in ("hf_vit", "hf_bert", "module")}
    return {"root": str(root), **ids}


@pytest.fixture
def runs(imported: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("XAIDASH_RUNS", imported["root"])
    return imported


def png(size: tuple[int, int] = (40, 30)) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", size, (200, 40, 40)).save(buf, format="PNG")
    return buf.getvalue()


def test_import_a_hugging_face_folder_and_open_it_on_explain(tmp_path: Path):
    folder = tmp_path / "my-vit"
    folder.mkdir()
    write_hf_vit(folder)
    at = open_page(make_app(), "views/import_model.py")
    assert at.title[0].value == "Import"
    at.text_input(key="import_hf_path").set_value(str(folder))
    click(at, "Import")
    [run] = list_runs()
    assert any(run.id in s for s in texts(at.success))
    summary = next(d.value for d in at.dataframe)
    rows = dict(zip(summary[""], summary["value"], strict=True))
    assert rows["classes"] == "3: cat, dog, bird" and rows["input"] == "3x32x32 images"
    assert rows["Grad-CAM layer"].startswith("hf.vit.layers.0 (tokens (1 leading + 4x4 patches)")
    click(at, "Open on Explain")
    assert at.title[0].value == "Explain" and at.session_state["xai_selected_run"] == run.id
    assert not [r for r in at.radio if r.key == "explain_source"]  # one source left: no choice to make
    assert any("no data set linked" in c for c in texts(at.caption))
    assert any("Images (PNG" in str(u.label) for u in at.get("file_uploader"))


def test_a_folder_that_cannot_be_imported_gets_its_reason_and_nothing_is_written(tmp_path: Path):
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "config.json").write_text('{"model_type": "vit"}')
    at = open_page(make_app(), "views/import_model.py")
    at.text_input(key="import_hf_path").set_value(str(tmp_path / "half"))
    click(at, "Import")
    assert any("config.json but no weights" in e for e in texts(at.error)), texts(at.error)
    assert not at.dataframe and list_runs() == []


def test_import_your_own_class_with_uploaded_weights_and_labels(tmp_path: Path):
    source, options = write_module(tmp_path)
    target, _, factory = source.removeprefix("module:").rpartition(":")
    assert options.weights is not None
    at = open_page(make_app(), "views/import_model.py")
    at.selectbox(key="import_kind").set_value("module").run()
    at.text_input(key="import_module_target").set_value(target)
    at.text_input(key="import_module_factory").set_value(factory)
    at.file_uploader(key="import_weights_upload").set_value(
        ("small_net.pt", options.weights.read_bytes(), "application/octet-stream")
    )
    at.file_uploader(key="import_labels").set_value(("labels.txt", b"red\ngreen\nblue\n", "text/plain"))
    at.text_input(key="import_shape").set_value("3x32x32")
    click(at, "Import")
    [run] = list_runs()
    assert run.config()["classes"] == ["red", "green", "blue"]
    rows = dict(zip(*(next(d.value for d in at.dataframe)[c] for c in ("", "value")), strict=True))
    assert rows["CAM (GAP + linear)"] == "fc"


def test_explain_an_uploaded_image_on_an_imported_vit(runs: dict[str, str]):
    at = open_page(make_app(runs["hf_vit"]), "views/explain.py")
    at.file_uploader(key="explain_images").set_value(("red.png", png(), "image/png")).run()
    at.multiselect(key="explain_methods").set_value(["gradcam", "ig", "lime", "attention_rollout"]).run()
    assert_ok(at)
    assert len(method_results(at)) == 4, texts(at.caption)
    assert not at.error


def test_explain_typed_text_on_an_imported_text_classifier(runs: dict[str, str]):
    at = open_page(make_app(runs["hf_bert"]), "views/explain.py")
    assert at.radio(key="explain_source").options == ["Type text", "Upload .txt / .csv"]
    at.multiselect(key="explain_methods").set_value(["ig", "lime", "attention"]).run()
    assert_ok(at)
    assert len(method_results(at)) == 6, texts(at.caption)  # 3 methods x the 2 example lines


@pytest.mark.parametrize("name", ["hf_vit", "hf_bert"])
def test_attention_page_on_imported_transformers(runs: dict[str, str], name: str):
    at = open_page(make_app(runs[name]), "views/attention.py")
    if name == "hf_vit":
        at.file_uploader(key="attention_images").set_value(("red.png", png(), "image/png")).run()
    assert_ok(at)
    assert not at.info or not any("has no attention" in i for i in texts(at.info))
    assert any("rollout" in str(h.value).lower() for h in at.subheader), texts(at.subheader)


def test_pages_that_need_a_data_set_say_so_in_one_line(runs: dict[str, str]):
    for page, needs in (
        ("views/compare.py", "so Compare, which scores methods on test samples, is unavailable"),
        ("views/embeddings.py", "so the Embeddings page, which projects the test split, is unavailable"),
        ("views/receptive_fields.py", "so the effective receptive field, an average over test images, is unavailable"),
    ):
        at = open_page(make_app(runs["module"]), page)
        lines = [i for i in texts(at.info) if "no data set linked" in i]
        assert len(lines) == 1 and needs in lines[0] and "--dataset" in lines[0], texts(at.info)
    receptive = open_page(make_app(runs["module"]), "views/receptive_fields.py")
    assert receptive.dataframe, "the theoretical receptive fields need no data set"


def test_model_page_on_an_imported_model(runs: dict[str, str]):
    at = open_page(make_app(runs["module"]), "views/model.py")
    assert any("imported model has no per-epoch checkpoints" in i for i in texts(at.info))
    assert at.dataframe  # the architecture table


def test_the_runs_label_and_sidebar_name_an_imported_model(runs: dict[str, str]):
    from xaidash.dashboard.state import run_label
    from xaidash.models.runs.store import resolve_run

    assert run_label(resolve_run(runs["module"])).startswith("module:SmallNet on no data set · imported")
    at = open_page(make_app(runs["module"]), "views/home.py")
    assert "**module:SmallNet** on **no data set**" in texts(at.sidebar.markdown)


@pytest.mark.slow  # the Embeddings page fits a projection of the test split
def test_a_linked_imported_model_gets_the_gallery_compare_and_embeddings(tmp_path: Path, monkeypatch):
    """torchvision's resnet18 linked to `shapes`: the pages that need a data set work on it."""
    root = tmp_path / "runs"
    run = import_external("torchvision_resnet", tmp_path / "model", root, input_shape=(), dataset="shapes")
    monkeypatch.setenv("XAIDASH_RUNS", str(root))
    at = open_page(make_app(run.id), "views/explain.py")
    assert at.radio(key="explain_source").value == "Test set"
    assert method_results(at), texts(at.caption)  # the gallery's first sample, explained
    compare = open_page(make_app(run.id), "views/compare.py")
    compare.number_input(key="compare_n").set_value(2)
    compare.multiselect(key="compare_methods").set_value(["saliency", "gradcam"])
    click(compare, "Compare")
    assert not compare.error, texts(compare.error)
    assert compare.dataframe
    embeddings = open_page(make_app(run.id), "views/embeddings.py")
    assert not embeddings.error and not [i for i in texts(embeddings.info) if "no data set" in i]


# Option values no model takes: (source, CLI arguments, the page's fields {key: value}, what the message says).
BAD_OPTIONS = [
    ("zoo:mlp", ["--option", "dropout=7"], {"import_options": "dropout=7"}, "dropout 7 is out of range"),
    ("timm:resnet18", ["--std", "0,0.2,0.2"], {"import_std": "0,0.2,0.2"}, "every value must be above 0"),
    ("timm:resnet18", ["--mean", "nan,0,0"], {"import_mean": "nan,0,0"}, "give 1 or 3 finite numbers"),
    (
        "timm:resnet18",
        ["--mean", "0.5", "--std", "0.2,0.2,0.2"],
        {"import_mean": "0.5", "import_std": "0.2,0.2,0.2"},
        "--mean has 1 values and --std 3",
    ),
]


@pytest.mark.parametrize(("source", "argv", "fields", "says"), BAD_OPTIONS, ids=["zoo-option", "std", "mean", "both"])
def test_the_page_refuses_the_options_the_command_line_refuses_with_the_same_message(
    source, argv, fields, says, capsys: pytest.CaptureFixture[str]
):
    """The page skipped the command line's checks: a std of 0 or an out-of-range zoo option went on to load."""
    from xaidash.dashboard.cli import main
    from xaidash.models.runs.store import runs_root

    assert main(["import", source, *argv]) == 2
    err = capsys.readouterr().err
    [cli] = [line for line in err.splitlines() if line.startswith("error: ")]  # one line, after 'importing ...'
    assert says in cli and "Traceback" not in err, err
    message = cli.removeprefix("error: ")

    prefix, _, argument = source.partition(":")
    at = open_page(make_app(), "views/import_model.py")
    at.selectbox(key="import_kind").set_value(prefix).run()
    if prefix == "zoo":
        at.selectbox(key="import_zoo_name").set_value(argument)
    else:
        at.text_input(key=f"import_{prefix}_name").set_value(argument)
    for key, value in fields.items():
        (at.text_area if key == "import_options" else at.text_input)(key=key).set_value(value)
    click(at, "Import")
    assert texts(at.error) == [f"Could not import {source}: {message}"]
    assert not at.dataframe and list_runs() == []
    assert not runs_root().exists() or not list(runs_root().iterdir())
