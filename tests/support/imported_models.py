"""Small external models saved the way their libraries save them, and imported with `import_model`.

Each entry of `EXTERNAL` writes one model into a folder (random weights, seeded) and says how to import it:
`save_pretrained` for Hugging Face (a ViT with its image processor, a BERT-style classifier with MiniLM's real
tokenizer, a Swin and a ConvNeXt), safetensors for timm (a ResNet-10, a ViT, a Swin), `torch.save(state_dict)` for
torchvision, and a model class in a `.py` file. Sizes are the smallest that keep each architecture's shape, so
an import takes about a second.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from xaidash.models.external import ImportOptions, import_model
from xaidash.models.runs.store import Run, load_bundle

MODULE_SOURCE = """
import torch
from torch import nn


class SmallNet(nn.Module):
    def __init__(self, classes: int = 3):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU()
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, classes)

    def forward(self, x):
        return self.fc(self.pool(self.features(x)).flatten(1))


def small_net(classes: int = 3) -> nn.Module:
    return SmallNet(classes)


def broken():
    raise ValueError("this factory needs a GPU")
"""


@dataclass
class External:
    """How to write one external model into a folder and import it."""

    modality: str
    write: Callable[[Path], tuple[str, ImportOptions]]  # folder -> (source, options)
    attention: bool = False  # global attention: Attention page, attention methods
    cam_layout: str | None = "nchw"  # the default Grad-CAM layer's layout; None: no CAM layer
    notes: dict[str, Any] = field(default_factory=dict)


def _seeded() -> None:
    torch.manual_seed(0)


def write_hf_vit(folder: Path) -> tuple[str, ImportOptions]:
    from transformers import ViTConfig, ViTForImageClassification, ViTImageProcessor

    _seeded()
    labels = {0: "cat", 1: "dog", 2: "bird"}
    config = ViTConfig(
        image_size=32,
        patch_size=8,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        num_labels=3,
        id2label=labels,
        label2id={v: k for k, v in labels.items()},
    )
    ViTForImageClassification(config).save_pretrained(folder)
    ViTImageProcessor(size={"height": 32, "width": 32}, image_mean=[0.5] * 3, image_std=[0.5] * 3).save_pretrained(
        folder
    )
    return f"hf:{folder}", ImportOptions()


def write_hf_deit(folder: Path) -> tuple[str, ImportOptions]:
    """DeiT: a class token and a distillation token before the patches."""
    from transformers import DeiTConfig, DeiTForImageClassification, DeiTImageProcessor

    _seeded()
    config = DeiTConfig(
        image_size=32,
        patch_size=8,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=3,
    )
    DeiTForImageClassification(config).save_pretrained(folder)
    DeiTImageProcessor(size={"height": 32, "width": 32}, crop_size={"height": 32, "width": 32}).save_pretrained(folder)
    return f"hf:{folder}", ImportOptions()


def minilm_tokenizer_folder() -> Path:
    from xaidash.models.zoo.minilm import model_path

    return model_path()


def write_hf_bert(folder: Path) -> tuple[str, ImportOptions]:
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    _seeded()
    tokenizer = AutoTokenizer.from_pretrained(str(minilm_tokenizer_folder()))
    labels = {0: "negative", 1: "positive"}
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        num_labels=2,
        id2label=labels,
        label2id={v: k for k, v in labels.items()},
    )
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return f"hf:{folder}", ImportOptions()


def write_hf_swin(folder: Path) -> tuple[str, ImportOptions]:
    from transformers import SwinConfig, SwinForImageClassification, ViTImageProcessor

    _seeded()
    config = SwinConfig(
        image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4, num_labels=3
    )
    SwinForImageClassification(config).save_pretrained(folder)
    ViTImageProcessor(size={"height": 32, "width": 32}).save_pretrained(folder)
    return f"hf:{folder}", ImportOptions(classes=("a", "b", "c"))


def write_hf_convnext(folder: Path) -> tuple[str, ImportOptions]:
    from transformers import ConvNextConfig, ConvNextForImageClassification, ConvNextImageProcessor

    _seeded()
    config = ConvNextConfig(hidden_sizes=[8, 16, 24, 32], depths=[1, 1, 1, 1], num_labels=3)
    ConvNextForImageClassification(config).save_pretrained(folder)
    ConvNextImageProcessor(size={"shortest_edge": 64}).save_pretrained(folder)
    return f"hf:{folder}", ImportOptions()


def _save_safetensors(model: torch.nn.Module, path: Path) -> Path:
    from safetensors.torch import save_file

    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path))
    return path


def write_timm_resnet(folder: Path) -> tuple[str, ImportOptions]:
    import timm

    _seeded()
    model = timm.create_model("resnet10t", pretrained=False, num_classes=3)  # timm's smallest ResNet
    weights = _save_safetensors(model, folder / "resnet10t.safetensors")
    return "timm:resnet10t", ImportOptions(weights=weights, input_shape=(3, 48, 48), classes=("a", "b", "c"))


TIMM_VIT_OPTIONS = {"img_size": 32, "patch_size": 8, "depth": 2, "embed_dim": 48, "num_heads": 3}


def write_timm_vit(folder: Path) -> tuple[str, ImportOptions]:
    import timm

    _seeded()
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=3, **TIMM_VIT_OPTIONS)
    weights = _save_safetensors(model, folder / "vit.safetensors")
    return "timm:vit_tiny_patch16_224", ImportOptions(weights=weights, model_options=dict(TIMM_VIT_OPTIONS))


TIMM_SWIN_OPTIONS = {
    "img_size": 32,
    "patch_size": 4,
    "window_size": 4,
    "embed_dim": 16,
    "depths": [1, 1],
    "num_heads": [2, 2],
}


def write_timm_swin(folder: Path) -> tuple[str, ImportOptions]:
    import timm

    _seeded()
    model = timm.create_model("swin_tiny_patch4_window7_224", pretrained=False, num_classes=3, **TIMM_SWIN_OPTIONS)
    weights = _save_safetensors(model, folder / "swin.safetensors")
    return "timm:swin_tiny_patch4_window7_224", ImportOptions(weights=weights, model_options=dict(TIMM_SWIN_OPTIONS))


def write_torchvision_resnet(folder: Path) -> tuple[str, ImportOptions]:
    from torchvision.models import get_model

    _seeded()
    model = get_model("resnet18", weights=None, num_classes=4)
    torch.save(model.state_dict(), folder / "resnet18.pt")
    return "torchvision:resnet18", ImportOptions(weights=folder / "resnet18.pt", input_shape=(3, 64, 64))


def write_module_file(folder: Path) -> Path:
    path = folder / "small_net.py"
    path.write_text(MODULE_SOURCE)
    return path


def write_module(folder: Path) -> tuple[str, ImportOptions]:
    import importlib.util

    path = write_module_file(folder)
    spec = importlib.util.spec_from_file_location("small_net_for_weights", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _seeded()
    torch.save(module.SmallNet().state_dict(), folder / "small_net.pt")
    return f"module:{path}:SmallNet", ImportOptions(
        weights=folder / "small_net.pt", input_shape=(3, 32, 32), classes=("red", "green", "blue")
    )


EXTERNAL: dict[str, External] = {
    "hf_vit": External("image", write_hf_vit, attention=True, cam_layout="tokens"),
    "hf_bert": External("text", write_hf_bert, attention=True, cam_layout=None),
    "hf_deit": External("image", write_hf_deit, attention=True, cam_layout="tokens"),
    "hf_swin": External("image", write_hf_swin, cam_layout="tokens"),
    "hf_convnext": External("image", write_hf_convnext),
    "timm_resnet": External("image", write_timm_resnet),
    "timm_vit": External("image", write_timm_vit, attention=True, cam_layout="tokens"),
    "timm_swin": External("image", write_timm_swin, cam_layout="nhwc"),
    "torchvision_resnet": External("image", write_torchvision_resnet),
    "module": External("image", write_module),
}


def import_external(name: str, folder: Path, root: Path, **changes: Any) -> Run:
    """Write `name` into `folder` and import it under the runs root `root` (options changed by `changes`)."""
    from dataclasses import replace

    folder.mkdir(parents=True, exist_ok=True)
    source, options = EXTERNAL[name].write(folder)
    return import_model(source, replace(options, **changes), root=root).run


@functools.cache
def imported_bundle(name: str, base: Path) -> Any:
    """A bundle of `name` imported once per test session under `base` (a session temporary folder)."""
    run = import_external(name, base / "models" / name, base / "runs")
    return load_bundle(run, device="cpu")
