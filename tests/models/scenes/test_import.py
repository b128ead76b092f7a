"""`xaidash scenes import`: torchvision detector and segmenter state dicts (safetensors) as scene runs that open,
predict and explain like the runs trained here, and the one-line refusals that leave no run folder."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from torchvision.models.detection import fasterrcnn_mobilenet_v3_large_320_fpn
from torchvision.models.segmentation import lraspp_mobilenet_v3_large

from xaidash.data.scenes.registry import load_scene_set
from xaidash.explainers.scenes.api import detection_targets, explain_scene
from xaidash.explainers.scenes.targets import RegionTarget
from xaidash.models.registry import ModelError
from xaidash.models.runs.store import Run
from xaidash.models.runs.table import MISSING, runs_table
from xaidash.models.scenes import cli as scenes_cli
from xaidash.models.scenes.importing import import_scene_checkpoint
from xaidash.models.scenes.loading import load_scene_run
from xaidash.models.scenes.predictions import Detections, Segmentation
from xaidash.models.scenes.train import SceneTrainSettings, train_scene_model
from xaidash.models.scenes.zoo import SCENE_MODELS

DETECTOR, SEGMENTER = "fasterrcnn_mobilenet_v3_large_320_fpn", "lraspp_mobilenet_v3_large"
CLASSES = ["circle", "square"]  # torchvision's num_classes=3: two object classes and the background


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


def _save(model: torch.nn.Module, path: Path) -> Path:
    torch.manual_seed(0)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path))
    return path


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("weights")
    det = fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None, num_classes=3)
    seg = lraspp_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=3)
    return {DETECTOR: _save(det, folder / "det.safetensors"), SEGMENTER: _save(seg, folder / "seg.safetensors")}


def _folders(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


def test_imported_detector_opens_predicts_and_explains(tmp_path: Path, weights: dict[str, Path]) -> None:
    run = import_scene_checkpoint(DETECTOR, weights[DETECTOR], CLASSES, name="mine", root=tmp_path)
    assert run.kind == "scene_model" and run.usable and run.summary()["state"] == "completed"
    assert "imported-mine" in run.id and _folders(tmp_path) == [run.id]  # the staging area is gone
    (row,) = runs_table(tmp_path)
    assert row["epochs"] == MISSING  # never trained here: no epochs, as an imported classifier (was "0/?")
    bundle = load_scene_run(run.path, "cpu")
    assert bundle.task == "detect" and bundle.classes == tuple(CLASSES) and bundle.dataset is None
    # the same weights as the file: the saved run loads back to the torchvision model's tensors
    reference = fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None, num_classes=3)
    reference.load_state_dict(_read(weights[DETECTOR]))
    for key, value in reference.state_dict().items():
        assert torch.equal(bundle.model.state_dict()[key].cpu(), value)
    image = load_scene_set("scenes", "test", 1).images[0]
    prediction = bundle.predict([image])[0]
    assert isinstance(prediction, Detections) and len(prediction.boxes) > 0  # random weights, score threshold 0.05
    targets = detection_targets(prediction, min_score=0.0)[:2]
    explained = explain_scene(bundle, image, targets, ["eigencam"], metrics=False)
    assert [e.error for e in explained] == [None, None]
    assert explained[0].map is not None and explained[0].map.shape == (96, 96)


def _read(path: Path) -> dict[str, torch.Tensor]:
    return load_file(str(path))


def test_imported_segmenter_opens_predicts_and_explains(tmp_path: Path, weights: dict[str, Path]) -> None:
    run = import_scene_checkpoint(SEGMENTER, weights[SEGMENTER], CLASSES, image_size=96, root=tmp_path)
    bundle = load_scene_run(run.path, "cpu")
    assert bundle.task == "segment" and bundle.dataset is None and bundle.image_size == 96
    image = load_scene_set("scenes", "test", 1).images[0]
    prediction = bundle.predict([image])[0]
    assert isinstance(prediction, Segmentation) and tuple(prediction.logits.shape) == (3, 96, 96)
    # the wrapper normalises with ImageNet's statistics, then returns torchvision's "out"
    reference = lraspp_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=3).eval()
    reference.load_state_dict(_read(weights[SEGMENTER]))
    mean = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)
    with torch.no_grad():
        expected = reference(((image - mean) / std)[None])["out"][0]
    assert torch.allclose(prediction.logits, expected, atol=1e-5)
    mask = torch.zeros(96, 96, dtype=torch.bool)
    mask[20:50, 30:60] = True
    explained = explain_scene(bundle, image, [RegionTarget(1, mask, "circle")], ["eigencam"], metrics=False)
    assert explained[0].error is None and explained[0].map is not None and explained[0].map.shape == (96, 96)


def test_refusals_are_one_line_and_leave_no_folder(tmp_path: Path, weights: dict[str, Path]) -> None:
    root = tmp_path / "runs"
    pickle = tmp_path / "model.pth"
    pickle.write_bytes(b"not read")
    cases = [
        ({"arch": "yolo", "weights": weights[DETECTOR], "classes": CLASSES}, DETECTOR),
        ({"arch": DETECTOR, "weights": tmp_path / "gone.safetensors", "classes": CLASSES}, "No weights file"),
        ({"arch": DETECTOR, "weights": pickle, "classes": CLASSES}, "save_file"),
        ({"arch": DETECTOR, "weights": weights[DETECTOR], "classes": []}, "No classes"),
        # three object classes: the box predictor's shapes differ
        (
            {"arch": DETECTOR, "weights": weights[DETECTOR], "classes": ["a", "b", "c"]},
            "0 keys missing, 0 unexpected, 4 of another shape (first: roi_heads",
        ),
        # a segmenter's state dict for the detector: nothing fits
        ({"arch": DETECTOR, "weights": weights[SEGMENTER], "classes": CLASSES}, "keys missing"),
    ]
    for kwargs, words in cases:
        with pytest.raises(ModelError) as e:
            import_scene_checkpoint(**kwargs, root=root)  # type: ignore[arg-type]
        assert words in str(e.value) and "\n" not in str(e.value), str(e.value)
        assert not [p for p in _folders(root) if p != ".importing"] and not any(root.glob(".importing/*"))


def test_imported_architectures_are_not_trained(tmp_path: Path, weights: dict[str, Path]) -> None:
    assert {s.id for s in SCENE_MODELS if not s.trainable} == {DETECTOR, SEGMENTER}
    with pytest.raises(ModelError, match="not trained here") as e:
        train_scene_model(SceneTrainSettings("scenes", DETECTOR, epochs=1, train_count=2), root=tmp_path)
    assert "fasterrcnn_small" in str(e.value) and not _folders(tmp_path)
    parser = argparse.ArgumentParser()
    scenes_cli.add_commands(parser.add_subparsers())
    assert DETECTOR not in parser.format_help()
    run = import_scene_checkpoint(DETECTOR, weights[DETECTOR], CLASSES, root=tmp_path)
    with pytest.raises(ModelError, match="imported, not trained here"):
        train_scene_model(None, resume=Run(run.path))


def test_cli_import_then_evaluate(
    tmp_path: Path, weights: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With --data the run names its scene set (whose classes it must have), so `scenes evaluate` reads its test split;
    without, evaluate refuses in one line."""
    shapes = lraspp_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=5)  # scenes' 4 classes
    file = _save(shapes, tmp_path / "shapes.safetensors")
    runs = tmp_path / "runs"
    monkeypatch.setenv("XAIDASH_RUNS", str(runs))
    parser = argparse.ArgumentParser()
    scenes_cli.add_commands(parser.add_subparsers())
    argv = ["import", "--arch", SEGMENTER, "--weights", str(file), "--classes", "circle, square, triangle, cross"]
    args = parser.parse_args([*argv, "--data", "scenes", "--name", "cli", "--image-size", "96"])
    assert args.func(args) == 0
    (folder,) = _folders(runs)
    assert folder in capsys.readouterr().out and "imported-cli" in folder
    args = parser.parse_args(["evaluate", "--run", folder, "--count", "2", "--device", "cpu", "--json"])
    assert args.func(args) == 0 and '"miou"' in capsys.readouterr().out
    with pytest.raises(ModelError, match="classes are circle, square, triangle, cross, not circle, square"):
        import_scene_checkpoint(SEGMENTER, weights[SEGMENTER], CLASSES, dataset="scenes", root=runs)
    plain = import_scene_checkpoint(SEGMENTER, weights[SEGMENTER], CLASSES, root=runs)
    args = parser.parse_args(["evaluate", "--run", plain.id, "--device", "cpu"])
    with pytest.raises(ModelError, match="names no scene set"):
        args.func(args)


def test_batch_norm_step_counters_may_be_missing(tmp_path: Path, weights: dict[str, Path]) -> None:
    """Frozen batch norms (torchvision's pretrained detectors) keep no `num_batches_tracked`: the rest must fit."""
    tensors = {k: v for k, v in _read(weights[DETECTOR]).items() if not k.endswith("num_batches_tracked")}
    assert len(tensors) < len(_read(weights[DETECTOR]))
    save_file(tensors, str(tmp_path / "frozen.safetensors"))
    run = import_scene_checkpoint(DETECTOR, tmp_path / "frozen.safetensors", CLASSES, root=tmp_path / "runs")
    assert load_scene_run(run.path, "cpu").task == "detect"
