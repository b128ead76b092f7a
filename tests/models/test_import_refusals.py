"""Imports that must be refused: each gets a message that names the problem (and what to do), and leaves
no run folder behind, not even a half-written one."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from imported_models import EXTERNAL, write_module_file
from safetensors.torch import save_file

from xaidash.dashboard.cli import main
from xaidash.data.errors import XaidashError
from xaidash.models.external import ImportOptions, import_model
from xaidash.models.runs.store import list_runs, load_bundle, runs_root


def assert_refused(source: str, options: ImportOptions, *fragments: str) -> str:
    with pytest.raises(XaidashError) as caught:
        import_model(source, options)
    message = str(caught.value)
    for fragment in fragments:
        assert fragment in message, message
    assert_nothing_written()
    return message


def assert_nothing_written() -> None:
    root = runs_root()
    assert list_runs() == []
    assert not root.exists() or [p.name for p in root.iterdir()] == [], list(root.iterdir())


def test_a_missing_folder(tmp_path: Path):
    assert_refused(f"hf:{tmp_path / 'nowhere'}", ImportOptions(), "no such folder")


def test_a_hub_id_offline_and_not_cached():
    assert_refused(
        "hf:someone/not-a-cached-model", ImportOptions(), "not in the local Hugging Face cache", "downloads are off"
    )


def test_a_config_without_weights(tmp_path: Path):
    source, _ = EXTERNAL["hf_vit"].write(tmp_path)
    (tmp_path / "model.safetensors").unlink()
    assert_refused(source, ImportOptions(), "config.json but no weights", "save_pretrained")


def test_a_folder_of_another_task(tmp_path: Path):
    from transformers import BertConfig, BertModel

    BertModel(BertConfig(vocab_size=50, hidden_size=8, num_hidden_layers=1, num_attention_heads=2)).save_pretrained(
        tmp_path
    )
    assert_refused(f"hf:{tmp_path}", ImportOptions(), "BertModel", "ForSequenceClassification")


def test_weights_of_other_shapes_name_the_layers(tmp_path: Path):
    _, options = EXTERNAL["timm_resnet"].write(tmp_path)
    import timm

    other = timm.create_model("resnet18", pretrained=False, num_classes=3)
    state = {k: v.contiguous() for k, v in other.state_dict().items()}
    state["layer1.0.conv1.weight"] = torch.zeros(32, 64, 3, 3)  # another width
    del state["layer4.1.bn2.bias"]
    state["extra.weight"] = torch.zeros(2)
    save_file(state, str(tmp_path / "bad.safetensors"))
    message = assert_refused(
        "timm:resnet18", replace(options, weights=tmp_path / "bad.safetensors"), "layer1.0.conv1.weight"
    )
    assert "layer4.1.bn2.bias" in message and "extra.weight" in message


def test_a_pickled_whole_model_is_not_unpickled(tmp_path: Path):
    _, options = EXTERNAL["module"].write(tmp_path)
    module = torch.nn.Sequential(torch.nn.Linear(2, 2))
    torch.save(module, tmp_path / "whole.pt")
    assert_refused(
        f"module:{tmp_path / 'small_net.py'}:SmallNet",
        replace(options, weights=tmp_path / "whole.pt"),
        "pickled",
        "torch.save(model.state_dict()",
    )


def test_a_factory_that_raises(tmp_path: Path):
    _, options = EXTERNAL["module"].write(tmp_path)
    assert_refused(f"module:{tmp_path / 'small_net.py'}:broken", options, "broken() failed", "needs a GPU")


def test_a_class_count_that_does_not_match_the_classes(tmp_path: Path):
    source, options = EXTERNAL["module"].write(tmp_path)
    assert_refused(source, replace(options, classes=("a", "b")), "3 outputs", "2 class names")
    source, options = EXTERNAL["torchvision_resnet"].write(tmp_path)
    assert_refused(source, replace(options, classes=("a", "b", "c")), "trained for 4 classes", "3 class names")


def test_a_data_set_with_other_classes_shows_both_lists(tmp_path: Path):
    source, options = EXTERNAL["hf_vit"].write(tmp_path)
    assert_refused(source, options.__class__(dataset="shapes"), "shapes has 4 classes", "3 outputs")
    _, options = EXTERNAL["torchvision_resnet"].write(tmp_path)
    message = assert_refused(
        "torchvision:resnet18",
        replace(options, input_shape=(), classes=("w", "x", "y", "z"), dataset="shapes"),
        "differ",
    )
    assert "w, x, y, z" in message and "circle, square, triangle, cross" in message


def test_a_data_set_of_another_image_size(tmp_path: Path):
    source, options = EXTERNAL["hf_vit"].write(tmp_path)
    assert_refused(source, replace(options, dataset="mnist"), "1x28x28", "3x32x32", "?size=")


def test_library_weights_offline_and_not_cached(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    assert_refused("torchvision:resnet18", ImportOptions(), "not in torch's cache", "--weights")
    assert_refused("timm:resnet18", ImportOptions(), "not cached", "--weights")


def test_unknown_names_and_sources(tmp_path: Path):
    assert_refused("keras:model.h5", ImportOptions(), "names no import source", "hf:PATH_OR_ID")
    assert_refused("timm:resnet_eighteen", ImportOptions(weights=tmp_path / "w.pt"), "does not exist")
    assert_refused("torchvision:resnet_18", ImportOptions(), "no image classifier", "resnet18")
    assert_refused("zoo:resnet_small", ImportOptions(), "needs --weights")


def test_text_and_empty_weight_files(tmp_path: Path):
    _, options = EXTERNAL["module"].write(tmp_path)
    source = f"module:{tmp_path / 'small_net.py'}:SmallNet"
    (tmp_path / "notes.pt").write_text("not weights at all")
    assert_refused(source, replace(options, weights=tmp_path / "notes.pt"), "neither a safetensors file nor")
    (tmp_path / "empty.safetensors").write_bytes(b"")
    assert_refused(source, replace(options, weights=tmp_path / "empty.safetensors"), "empty")


def test_state_dicts_wrapped_by_training_scripts_are_read(tmp_path: Path):
    """{'state_dict': ...} and DataParallel's 'module.' prefixes are common; both load (and say so)."""
    source, options = EXTERNAL["module"].write(tmp_path)
    state = torch.load(tmp_path / "small_net.pt", weights_only=True)
    torch.save({"epoch": 3, "state_dict": {f"module.{k}": v for k, v in state.items()}}, tmp_path / "ckpt.pt")
    imported = import_model(source, replace(options, weights=tmp_path / "ckpt.pt"))
    assert any("'state_dict' entry" in n for n in imported.notes)
    assert any("module." in n for n in imported.notes)


def test_a_module_file_that_moved_is_reported_on_load(tmp_path: Path):
    source, options = EXTERNAL["module"].write(tmp_path)
    run = import_model(source, options).run
    (tmp_path / "small_net.py").rename(tmp_path / "elsewhere.py")
    with pytest.raises(XaidashError, match=r"is gone \(moved or deleted"):
        load_bundle(run)


def test_a_refused_import_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    write_module_file(tmp_path)
    code = main(["import", f"module:{tmp_path / 'small_net.py'}:broken", "--weights", str(tmp_path / "none.pt")])
    assert code == 2
    err = capsys.readouterr().err
    assert "error:" in err and "none.pt" in err
    assert_nothing_written()


def test_bad_option_values_are_refused_before_anything_runs(capsys: pytest.CaptureFixture[str]):
    for argv, fragment in [
        (["--input-shape", "224x224"], "channels x height x width"),
        (["--mean", "a,b"], "one number per channel"),
        (["--classes", "cat,cat"], "unique"),
        (["--layer", "head=fc"], "KIND=MODULE_PATH"),
    ]:
        assert main(["import", "timm:resnet18", *argv]) == 2
        assert fragment in capsys.readouterr().err
    assert_nothing_written()


def test_classes_files_in_three_formats(tmp_path: Path):
    from xaidash.models.external.options import read_classes_file

    (tmp_path / "a.txt").write_text("cat\ndog\n\nbird\n")
    (tmp_path / "b.json").write_text(json.dumps(["cat", "dog", "bird"]))
    (tmp_path / "c.json").write_text(json.dumps({"0": "cat", "2": "bird", "1": "dog"}))
    for name in ("a.txt", "b.json", "c.json"):
        assert read_classes_file(tmp_path / name) == ("cat", "dog", "bird")
    (tmp_path / "d.json").write_text(json.dumps({"0": "cat", "2": "bird"}))
    with pytest.raises(XaidashError, match="without gaps"):
        read_classes_file(tmp_path / "d.json")


def as_if_saved_on_a_gpu(src: Path, dst: Path) -> Path:
    """A torch.save file whose tensors say they were saved on cuda:0 (what a GPU machine writes), made on a CPU by
    rewriting the storage location in its pickle (protocol 2: BINUNICODE, 4-byte little-endian length)."""
    import zipfile

    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename.endswith("data.pkl"):
                assert b"X\x03\x00\x00\x00cpu" in data
                data = data.replace(b"X\x03\x00\x00\x00cpu", b"X\x06\x00\x00\x00cuda:0")
            zout.writestr(item, data)
    return dst


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only path")
def test_weights_saved_on_a_gpu_load_on_a_cpu(tmp_path: Path):
    source, options = EXTERNAL["module"].write(tmp_path)
    gpu = as_if_saved_on_a_gpu(tmp_path / "small_net.pt", tmp_path / "saved_on_gpu.pt")
    with pytest.raises(RuntimeError, match="CUDA"):
        torch.load(gpu, weights_only=True)  # what a plain load does on this machine
    imported = import_model(source, replace(options, weights=gpu))
    assert load_bundle(imported.run, device="cpu").device.type == "cpu"


def test_option_values_no_model_takes_are_refused_by_import_model_itself(tmp_path: Path):
    """The checks the command line made are import_model's (the Import page calls it without the command line)."""
    weights = tmp_path / "w.pt"
    weights.write_bytes(b"never read")
    assert_refused("zoo:mlp", ImportOptions(weights=weights, model_options={"dropout": 7}), "dropout 7 is out of range")
    assert_refused(
        "timm:resnet18", ImportOptions(std=(0.0, 0.2, 0.2)), "--std 0.0,0.2,0.2: every value must be above 0"
    )
    assert_refused("timm:resnet18", ImportOptions(mean=(float("inf"),)), "--mean inf: give 1 or 3 finite numbers")
