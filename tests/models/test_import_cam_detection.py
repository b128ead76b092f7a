"""CAM on a user's own module (`module:FILE.py:FACTORY`) that ends in global average pooling and one linear layer:
found whether the pooled maps come from a stage, from an `nn.ReLU()` module after the last convolution, or (not
findable: no module returns them) from a functional `F.relu`, in which case the import says exactly which layer is
missing and how to name it with `--layer gradcam=...`."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from xaidash.explainers.api import explain
from xaidash.models.external import ImportOptions, import_model
from xaidash.models.external.layers import Layers
from xaidash.models.runs.store import Run, load_bundle

SOURCE = """
import torch
import torch.nn.functional as F
from torch import nn


class SeqNet(nn.Module):
    '''conv -> ReLU -> conv -> ReLU -> AdaptiveAvgPool2d(1) -> Flatten -> Linear, all in one Sequential.'''

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 4),
        )

    def forward(self, x):
        return self.net(x)


class ReluModuleNet(nn.Module):
    '''Named layers, the last activation an nn.ReLU() module, torch.flatten after the pooling.'''

    def __init__(self):
        super().__init__()
        self.conv1, self.relu1 = nn.Conv2d(3, 8, 3, padding=1), nn.ReLU()
        self.conv2, self.relu2 = nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU()
        self.gap, self.fc = nn.AdaptiveAvgPool2d((1, 1)), nn.Linear(16, 4)

    def forward(self, x):
        return self.fc(torch.flatten(self.gap(self.relu2(self.conv2(self.relu1(self.conv1(x))))), 1))


class FunctionalNet(nn.Module):
    '''F.relu after the last convolution, then the mean over H and W: no module returns the pooled maps.'''

    def __init__(self):
        super().__init__()
        self.conv1, self.conv2, self.fc = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 16, 3, padding=1), nn.Linear(16, 4)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        return self.fc(F.relu(self.conv2(x)).mean(dim=(2, 3)))
"""
CLASSES = ("circle", "square", "triangle", "cross")


@pytest.fixture(scope="module")
def user_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("user_modules")
    path = folder / "nets.py"
    path.write_text(SOURCE)
    spec = importlib.util.spec_from_file_location("nets_for_weights", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name in ("SeqNet", "ReluModuleNet", "FunctionalNet"):
        torch.manual_seed(0)
        torch.save(getattr(module, name)().state_dict(), folder / f"{name}.pt")
    return path


def import_user(path: Path, factory: str, root: Path, **layers: str) -> Run:
    options = ImportOptions(
        weights=path.parent / f"{factory}.pt", input_shape=(3, 32, 32), classes=CLASSES, layers=dict(layers)
    )
    return import_model(f"module:{path}:{factory}", options, root=root).run


def cam_map(run: Run) -> torch.Tensor:
    bundle = load_bundle(run, device="cpu")
    torch.manual_seed(1)
    return torch.as_tensor(explain(bundle, torch.rand(2, 3, 32, 32), method="cam").attributions)


@pytest.mark.parametrize(
    ("factory", "layer", "classifier"), [("SeqNet", "net.3", "net.6"), ("ReluModuleNet", "relu2", "fc")]
)
def test_global_average_pooling_and_one_linear_layer_is_found(user_file, tmp_path, factory, layer, classifier):
    run = import_user(user_file, factory, tmp_path / "runs")
    layers = Layers.from_json(run.config()["layers"])
    # The maps the pooling reads: after the ReLU module, not the convolution before it.
    assert (layers.last_conv, layers.gap_classifier, layers.cam_note) == (layer, classifier, None)
    assert layers.conv_layers[-1] == layer
    maps = cam_map(run)  # CAM runs on it (it refused before: 'does not apply')
    assert maps.shape[0] == 2 and torch.isfinite(maps).all() and maps.abs().sum() > 0


def test_functional_activation_says_which_layer_is_missing_and_how_to_name_it(user_file, tmp_path):
    run = import_user(user_file, "FunctionalNet", tmp_path / "runs")
    layers = Layers.from_json(run.config()["layers"])
    assert layers.gap_classifier is None and layers.last_conv == "conv2"  # Grad-CAM still has its layer
    note = layers.cam_note or ""
    assert "`fc` reads the global average of F.relu(`conv2`'s output)" in note
    assert "nn.ReLU()" in note and "--layer gradcam=" in note
    with pytest.raises(Exception, match="CAM"):
        cam_map(run)


def test_the_import_page_says_which_layer_cam_is_missing(user_file, tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    root = tmp_path / "runs"
    run = import_user(user_file, "FunctionalNet", root)
    monkeypatch.setenv("XAIDASH_RUNS", str(root))
    at = AppTest.from_file(str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py"), default_timeout=120)
    at.session_state["import_last_run"] = run.id
    at.run()
    at.switch_page("views/import_model.py").run()
    assert not at.exception, [e.value for e in at.exception]
    rows = dict(zip(*(next(d.value for d in at.dataframe)[c] for c in ("", "value")), strict=True))
    assert rows["CAM (GAP + linear)"] == "not found: see below"
    info = " ".join(str(i.value) for i in at.info)
    assert "F.relu(`conv2`'s output)" in info and "--layer gradcam=" in info


def test_the_command_line_prints_the_same_note(user_file, capsys):
    """`xaidash import` printed 'CAM (GAP + linear): does not apply' where the page names the missing layer."""
    from xaidash.dashboard.cli import main
    from xaidash.models.runs.store import resolve_run

    weights = user_file.parent / "FunctionalNet.pt"
    argv = ["import", f"module:{user_file}:FunctionalNet", "--weights", str(weights), "--input-shape", "3x32x32"]
    assert main(argv) == 0
    out = capsys.readouterr()
    run = resolve_run(out.out.strip().splitlines()[-1])
    note = Layers.from_json(run.config()["layers"]).cam_note
    assert note and "--layer gradcam=" in note
    lines = [line.strip() for line in out.err.splitlines()]
    cam = lines.index("CAM (GAP + linear): not found: see below")
    assert lines[cam + 1] == f"CAM note: {note}"  # the import's own wording, right under the row it explains
    assert "does not apply" not in out.err
