"""`xaidash scenes import --module FILE.py:FACTORY --output FORMAT --cam-layer LAYER`: a detector or segmenter of
one's own, in each declared output format, becomes a scene run that opens, predicts and is explained per box or
region (Grad-CAM through its layer, IG); a model that does not give what it declares, a missing layer, weights that do
not fit, code that fails or moved: one line each, and no folder left."""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from xaidash.explainers.scenes.api import detection_targets, explain_scene, region_targets
from xaidash.models.registry import ModelError
from xaidash.models.scenes import cli as scenes_cli
from xaidash.models.scenes.importing import import_scene_module
from xaidash.models.scenes.loading import load_scene_run
from xaidash.models.scenes.predictions import Detections, Segmentation

CLASSES = ["circle", "square"]

# A user's file: a YOLO-style detector (boxes at fixed places, scores and classes from its features, after "NMS"),
# a torchvision-style one (the same, answering with dicts), and a segmenter giving logits or torchvision's {"out"}.
CODE = textwrap.dedent(
    """
    import torch
    from torch import nn

    BOXES = torch.tensor([[8.0, 8.0, 40.0, 40.0], [50.0, 20.0, 90.0, 60.0]])


    class Features(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, stride=2, padding=1)
            self.act = nn.ReLU()
            self.head = nn.Conv2d(8, 8, 3, padding=1)
            self.act2 = nn.ReLU()

        def forward(self, x):
            return self.act2(self.head(self.act(self.conv(x))))


    class Yolo(nn.Module):
        def __init__(self, classes=2):
            super().__init__()
            self.features = Features()
            self.score = nn.Linear(8, 2 * classes)
            self.classes = classes

        def forward(self, x):
            pooled = self.features(x).mean(dim=(2, 3))
            logits = self.score(pooled).view(len(x), 2, self.classes)
            probs = logits.softmax(-1)
            score, label = probs.max(-1)
            boxes = BOXES.to(x).expand(len(x), 2, 4)
            return torch.cat([boxes, score[..., None], label[..., None].to(x)], dim=-1)


    class TorchvisionStyle(Yolo):
        def forward(self, images):
            rows = super().forward(torch.stack(list(images)))
            return [{"boxes": r[:, :4], "scores": r[:, 4], "labels": r[:, 5].long() + 1} for r in rows]


    class Segmenter(nn.Module):
        def __init__(self, classes=2, wrap=False):
            super().__init__()
            self.features = Features()
            self.up = nn.ConvTranspose2d(8, classes + 1, 2, stride=2)
            self.wrap = wrap

        def forward(self, x):
            out = self.up(self.features(x))
            return {"out": out} if self.wrap else out


    def broken():
        raise RuntimeError("no GPU here")
    """
)


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def user(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The user's file and a safetensors state dict of each of its models."""
    folder = tmp_path_factory.mktemp("own")
    code = folder / "my_models.py"
    code.write_text(CODE)
    namespace: dict = {}
    exec(compile(CODE, str(code), "exec"), namespace)
    torch.manual_seed(0)
    files = {"code": code}
    for name, model in (("det", namespace["Yolo"]()), ("seg", namespace["Segmenter"]())):
        files[name] = folder / f"{name}.safetensors"
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(files[name]))
    return files


def _folders(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name != ".importing") if root.exists() else []


@pytest.mark.parametrize(("factory", "output"), [("Yolo", "xyxy_score_class"), ("TorchvisionStyle", "torchvision")])
def test_a_detector_of_ones_own_is_explained_per_box(user, tmp_path, factory, output) -> None:
    target = f"{user['code']}:{factory}"
    run = import_scene_module(
        target, user["det"], CLASSES, output=output, cam_layer="features.head", image_size=96, root=tmp_path
    )
    assert run.kind == "scene_model" and _folders(tmp_path) == [run.id] and factory in run.id
    bundle = load_scene_run(run.path, "cpu")
    assert bundle.task == "detect" and bundle.spec.cam_layer == "net.features.head"
    image = torch.rand(3, 96, 96, generator=torch.Generator().manual_seed(1))
    (prediction,) = bundle.predict([image])
    assert isinstance(prediction, Detections) and len(prediction) == 2
    assert set(prediction.labels.tolist()) <= {1, 2}  # class indices from 0 became labels from 1
    targets = detection_targets(prediction, min_score=0.0)
    made = explain_scene(bundle, image, targets, ["gradcam", "ig"], {"ig": {"steps": 4}}, metrics=False)
    assert [e.error for e in made] == [None] * 4
    assert all(e.map is not None and e.map.shape == (96, 96) for e in made)
    # the box's score reaches the image through the user's layers: IG's maps are not empty (Grad-CAM's ReLU may be,
    # on random weights)
    assert all(float(abs(e.map).sum()) > 0 for e in made if e.method == "ig" and e.map is not None)


@pytest.mark.parametrize(("options", "output"), [({}, "logits"), ({"wrap": True}, "torchvision_out")])
def test_a_segmenter_of_ones_own_is_explained_per_region(user, tmp_path, options, output) -> None:
    run = import_scene_module(
        f"{user['code']}:Segmenter", user["seg"], CLASSES, output=output, cam_layer="features.head",
        options=options, image_size=64, root=tmp_path,
    )  # fmt: skip
    bundle = load_scene_run(run.path, "cpu")
    image = torch.rand(3, 64, 64, generator=torch.Generator().manual_seed(2))
    (prediction,) = bundle.predict([image])
    assert isinstance(prediction, Segmentation) and prediction.logits.shape == (3, 64, 64)
    regions = region_targets(prediction)
    assert regions
    (made,) = explain_scene(bundle, image, regions[:1], ["seg_gradcam"], metrics=False)
    assert made.error is None and made.map is not None and made.map.shape == (64, 64)


def test_refusals_are_one_line_and_leave_no_folder(user, tmp_path) -> None:
    root = tmp_path / "runs"
    code = f"{user['code']}"
    pickle = tmp_path / "net.pt"
    pickle.write_bytes(b"never read")
    base = {"weights": user["det"], "classes": CLASSES, "cam_layer": "features.head", "image_size": 96}
    cases = [
        ({"target": f"{code}:Yolo", "output": "yolo"}, "Unknown --output 'yolo': declare one of torchvision (detect)"),
        # it takes a tensor, not torchvision's list of images
        ({"target": f"{code}:Yolo", "output": "torchvision"}, "passed as declared --output torchvision passes it"),
        ({"target": f"{code}:Yolo", "output": "logits"}, "not logits of shape (1, 3, 96, 96)"),
        ({"target": f"{code}:Yolo", "output": "xyxy_score_class", "cam_layer": "backbone.x"}, "no layer 'backbone.x'"),
        ({"target": f"{code}:Yolo", "output": "xyxy_score_class", "weights": user["seg"]}, "keys missing"),
        ({"target": f"{code}:Yolo", "output": "xyxy_score_class", "weights": pickle}, "save_file"),
        ({"target": f"{code}:Nope", "output": "xyxy_score_class"}, "has no 'Nope'"),
        ({"target": f"{code}:broken", "output": "xyxy_score_class"}, "no GPU here"),
        ({"target": str(tmp_path / "gone.py") + ":Yolo", "output": "xyxy_score_class"}, "does not exist"),
        ({"target": f"{code}:Yolo", "output": "xyxy_score_class", "classes": []}, "No classes"),
    ]
    for given, words in cases:
        kwargs = base | given
        with pytest.raises(ModelError) as e:
            import_scene_module(kwargs.pop("target"), kwargs.pop("weights"), kwargs.pop("classes"), root=root, **kwargs)
        assert words in str(e.value) and "\n" not in str(e.value), str(e.value)
        assert not _folders(root) and not any(root.glob(".importing/*"))


def test_the_cli_imports_a_module_and_refuses_half_a_request(user, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("XAIDASH_RUNS", str(tmp_path / "runs"))
    parser = argparse.ArgumentParser()
    scenes_cli.add_commands(parser.add_subparsers())
    argv = ["import", "--module", f"{user['code']}:Segmenter", "--weights", str(user["seg"]), "--classes", "a,b"]
    args = parser.parse_args([*argv, "--output", "torchvision_out", "--cam-layer", "features.head", "--option",
                              "wrap=true", "--image-size", "32", "--name", "mine"])  # fmt: skip
    assert args.func(args) == 0
    assert "imported-mine" in capsys.readouterr().out
    with pytest.raises(ModelError, match="--module needs --output"):
        args = parser.parse_args(argv)
        args.func(args)
    with pytest.raises(ModelError, match="describe a --module of your own"):
        args = parser.parse_args(["import", "--arch", "x", "--weights", "w", "--classes", "a", "--cam-layer", "l"])
        args.func(args)


def test_a_moved_file_is_said_when_the_run_is_opened(user, tmp_path) -> None:
    code = tmp_path / "moving.py"
    code.write_text(CODE)
    run = import_scene_module(
        f"{code}:Yolo", user["det"], CLASSES, output="xyxy_score_class", cam_layer="features.head", root=tmp_path
    )
    code.rename(tmp_path / "moved.py")
    with pytest.raises(ModelError, match="is gone"):
        load_scene_run(run.path, "cpu")
