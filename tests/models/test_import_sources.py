"""`xaidash import` on every source, then `xaidash explain` on what it made.

Each model of `imported_models.EXTERNAL` is built small with random weights, saved the way its library saves
it, imported through the command line (the run id is the last line printed), and explained through the
command line with a CAM method, IG, LIME and, for transformers, attention: every map must be finite and of the
input's size. The run folder must rebuild the model alone (the logits of the original and of `load_bundle` agree).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from imported_models import EXTERNAL, TIMM_VIT_OPTIONS
from PIL import Image

from xaidash.dashboard.cli import main
from xaidash.data.tokenizer import split_words
from xaidash.explainers.inputs import resolve_sample
from xaidash.explainers.inspection.attention import has_attention
from xaidash.models.external import ImportOptions, import_model, parse_source
from xaidash.models.runs.store import list_runs, load_bundle, resolve_run
from xaidash.models.runs.table import runs_table

CHEAP = ["--param", "ig.steps=8", "--param", "lime.samples=40"]


def as_argv(source: str, options: ImportOptions) -> list[str]:
    """The command line that gives these options."""
    argv = ["import", source]
    if options.weights:
        argv += ["--weights", str(options.weights)]
    if options.input_shape:
        argv += ["--input-shape", "x".join(map(str, options.input_shape))]
    if options.classes:
        argv += ["--classes", ",".join(options.classes)]
    for key, value in options.model_options.items():
        argv += ["--option", f"{key}={json.dumps(value)}"]
    return argv


def import_by_cli(name: str, folder: Path, capsys: pytest.CaptureFixture[str]) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    source, options = EXTERNAL[name].write(folder)
    capsys.readouterr()
    assert main(as_argv(source, options)) == 0
    out = capsys.readouterr().out.strip().splitlines()
    return out[-1]


def picture(path: Path) -> Path:
    rng = np.random.default_rng(0)
    Image.fromarray((rng.uniform(0, 1, (40, 52, 3)) * 255).astype(np.uint8)).save(path)
    return path


# torchvision's ResNet-18 (11M parameters) is the slowest to build, check and explain: the quick loop leaves it out.
NAMES = [pytest.param(n, marks=[pytest.mark.slow] if n == "torchvision_resnet" else []) for n in EXTERNAL]


@pytest.mark.parametrize("name", NAMES)
def test_import_then_explain_on_the_command_line(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    ext = EXTERNAL[name]
    run_id = import_by_cli(name, tmp_path / "model", capsys)
    assert [r.id for r in list_runs()] == [run_id]
    config = resolve_run(run_id).config()
    assert config["source"]["kind"] == name.split("_")[0]
    assert config["dataset"] is None and config["modality"] == ext.modality
    assert "torch" in config["source"]["versions"]
    assert resolve_run(run_id).summary()["state"] == "imported"
    assert runs_table()[0]["state"] == "imported" and runs_table()[0]["dataset"] == "(none)"

    if ext.modality == "image":
        methods = ["gradcam", "ig", "lime"] + (["attention_rollout"] if ext.attention else [])
        given = str(picture(tmp_path / "input.png"))
    else:
        methods = ["ig", "lime", "attention", "attention_rollout"]
        given = "the plot was not bad, a wonderful cast"
    out = tmp_path / "out"
    code = main(
        ["explain", "--run", run_id, "--input", given, "--methods", ",".join(methods), "--out", str(out), *CHEAP]
    )
    report = json.loads((out / "report.json").read_text())  # docs/report-format.md
    entries = {e["method"]: e for e in report["explanations"]}
    assert code == 0, entries
    bundle = load_bundle(run_id, device="cpu")
    for method in methods:
        assert entries[method]["error"] is None, entries[method]
        if ext.modality == "image":
            attr = np.load(out / entries[method]["files"]["attribution"])
            assert attr.shape == tuple(bundle.info.input_shape[1:])
        else:
            attr = np.asarray(entries[method]["figure"]["scores"], dtype=np.float64)
            assert attr.shape == (len(split_words(given)),)
        assert np.isfinite(attr).all()
    assert has_attention(bundle.model) == ext.attention


@pytest.mark.parametrize("name", NAMES)
def test_the_run_folder_alone_rebuilds_the_model(name: str, tmp_path: Path):
    source, options = EXTERNAL[name].write(tmp_path)
    imported = import_model(source, options)
    kind, argument = parse_source(source)
    loaded = kind.load(argument, options)  # the model as its source reads it, apart from any run
    bundle = load_bundle(imported.run, device="cpu")
    if EXTERNAL[name].modality == "text":
        x = bundle.prepare(["a short text", "and another, longer one"])
    else:
        x = torch.randn(2, *bundle.info.input_shape, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        expected = loaded.model.eval()(x)
    torch.testing.assert_close(bundle.logits(x), expected, rtol=1e-4, atol=1e-5)
    layers = imported.run.config()["layers"]
    layout = layers["layouts"].get(layers["last_conv"], {}).get("kind", "nchw") if layers["last_conv"] else None
    assert layout == EXTERNAL[name].cam_layout


def test_labels_come_from_id2label_and_normalisation_from_the_processor(tmp_path: Path):
    source, options = EXTERNAL["hf_vit"].write(tmp_path)
    run = import_model(source, options).run
    config = run.config()
    assert config["classes"] == ["cat", "dog", "bird"]
    assert config["dataset_info"]["input_shape"] == [3, 32, 32]
    assert config["input_mean"] == [0.5, 0.5, 0.5] and config["input_std"] == [0.5, 0.5, 0.5]
    assert (run.path / "hf" / "preprocessor_config.json").is_file() and (run.path / "hf" / "config.json").is_file()


def test_timm_vit_reads_its_fixed_image_size_and_a_late_block(tmp_path: Path):
    source, options = EXTERNAL["timm_vit"].write(tmp_path)
    config = import_model(source, options).run.config()
    assert config["dataset_info"]["input_shape"] == [3, TIMM_VIT_OPTIONS["img_size"], TIMM_VIT_OPTIONS["img_size"]]
    # Two blocks and a class-token head: the last block's patch tokens never reach the logits, so the
    # Grad-CAM layer is the block before it, read as 1 class token + a 4x4 patch grid.
    assert config["layers"]["last_conv"] == "blocks.0"
    assert config["layers"]["layouts"]["blocks.0"] == {"kind": "tokens", "prefix": 1, "grid": [4, 4]}
    assert config["layers"]["attention"] == ["blocks.0.attn", "blocks.1.attn"]


@pytest.mark.slow  # builds torchvision's ResNet-18
def test_cnn_sources_find_the_last_stage_and_the_gap_classifier(tmp_path: Path):
    for name in ("timm_resnet", "torchvision_resnet"):
        (tmp_path / name).mkdir()
        source, options = EXTERNAL[name].write(tmp_path / name)
        layers = import_model(source, options).run.config()["layers"]
        assert layers["conv_layers"][-4:] == ["layer1", "layer2", "layer3", "layer4"]
        assert layers["last_conv"] == "layer4" and layers["gap_classifier"] == "fc"


def test_a_grad_cam_layer_can_be_chosen(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    source, options = EXTERNAL["timm_vit"].write(tmp_path)
    argv = [*as_argv(source, options), "--layer", "gradcam=blocks.1"]
    assert main(argv) == 0
    layers = list_runs()[0].config()["layers"]
    assert layers["last_conv"] == "blocks.1" and layers["overrides"] == {"gradcam": "blocks.1"}
    capsys.readouterr()
    assert main([*as_argv(source, options), "--layer", "gradcam=blocks.9"]) == 2
    assert "no module 'blocks.9'" in capsys.readouterr().err


def test_linking_a_data_set_gives_its_gallery(tmp_path: Path):
    """torchvision's resnet18 fits any size: linked to shapes (4 classes, 32x32) it is fed the data set's images."""
    source, options = EXTERNAL["torchvision_resnet"].write(tmp_path)
    imported = import_model(source, replace(options, input_shape=(), dataset="shapes"))
    config = imported.run.config()
    assert config["dataset"] == "shapes" and config["classes"] == ["circle", "square", "triangle", "cross"]
    assert config["dataset_info"]["input_shape"] == [3, 32, 32]
    assert any("fed 3x32x32 images" in n for n in imported.notes)
    bundle = load_bundle(imported.run, device="cpu")
    assert bundle.has_dataset
    sample = resolve_sample("dataset:0", bundle)
    assert sample.mask is not None and tuple(sample.raw.shape) == (3, 32, 32)


def test_deit_keeps_two_leading_tokens_apart_from_the_patches(tmp_path: Path):
    """DeiT puts a class and a distillation token before the patches: Grad-CAM's layout and the Attention page's
    view both drop the two."""
    from xaidash.explainers.inspection.attention_view import attention_view

    source, options = EXTERNAL["hf_deit"].write(tmp_path)
    bundle = load_bundle(import_model(source, options).run, device="cpu")
    layout = bundle.spec.feature_layout(bundle.spec.last_conv)
    assert (layout.kind, layout.prefix, layout.grid) == ("tokens", 2, (4, 4))
    view = attention_view(bundle, torch.rand(3, 32, 32))
    assert view.tokens[:3] == ["[CLS]", "[DIST]", "patch (0,0)"] and view.query == 0
    assert view.patch_map(view.matrix(0)).shape == (4, 4)


def test_a_hub_id_is_read_from_the_local_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """hf:ORG/NAME offline: the snapshot in the Hugging Face cache (the layout huggingface_hub writes) is used."""
    import huggingface_hub.constants

    cache = tmp_path / "hub"
    snapshot = cache / "models--someorg--tiny-vit" / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    EXTERNAL["hf_vit"].write(snapshot)
    (cache / "models--someorg--tiny-vit" / "refs").mkdir()
    (cache / "models--someorg--tiny-vit" / "refs" / "main").write_text("0123abcd")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    config = import_model("hf:someorg/tiny-vit", ImportOptions()).run.config()
    assert config["source"]["record"]["read_from"] == str(snapshot)
    assert config["model"] == "hf:someorg/tiny-vit"
    assert config["classes"] == ["cat", "dog", "bird"]


def test_a_package_in_the_working_folder_imports_without_touching_the_search_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    import sys

    from imported_models import MODULE_SOURCE

    package = tmp_path / "my_nets"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "small.py").write_text(MODULE_SOURCE)
    (tmp_path / "weights_here").mkdir()
    _, options = EXTERNAL["module"].write(tmp_path / "weights_here")
    monkeypatch.chdir(tmp_path)
    search_path = list(sys.path)
    try:
        run = import_model("module:my_nets.small:SmallNet", options).run
        assert sys.path == search_path  # the working folder was searched for my_nets alone
        bundle = load_bundle(run.id)
        assert bundle.info.classes == ("red", "green", "blue")
    finally:
        for name in [n for n in sys.modules if n == "my_nets" or n.startswith("my_nets.")]:
            del sys.modules[name]
