"""Layer detection on models xaidash did not build: feature maps, tokens on the patch grid, the classifier after
global average pooling, the token embedding, checked on small hand-written networks."""

from __future__ import annotations

import torch
from torch import nn

from xaidash.models.external.layers import detect_image_layers, detect_text_layers, layout_of


def test_layouts_of_outputs():
    hw = (32, 32)
    assert layout_of(torch.zeros(2, 64, 8, 8), hw, 2).kind == "nchw"
    assert layout_of(torch.zeros(2, 8, 8, 96), hw, 2).kind == "nhwc"
    vit = layout_of(torch.zeros(2, 17, 48), hw, 2)
    assert (vit.kind, vit.prefix, vit.grid) == ("tokens", 1, (4, 4))
    deit = layout_of(torch.zeros(2, 18, 48), hw, 2)
    assert (deit.prefix, deit.grid) == (2, (4, 4))
    assert layout_of(torch.zeros(8, 16, 48), hw, 2) is None  # windowed attention: windows x batch
    assert layout_of(torch.zeros(2, 32, 1), hw, 2) is None  # a pooled (N, C, 1) vector
    assert layout_of(torch.zeros(2, 10), hw, 2) is None
    assert layout_of(torch.zeros(2, 64, 5, 12), hw, 2) is None  # not the input divided by one stride


class Block(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, stride, 1)
        self.bn = nn.BatchNorm2d(cout)
        self.act = nn.ReLU()
        self.skip = nn.Conv2d(cin, cout, 1, stride)

    def forward(self, x):
        return self.act(self.bn(self.conv(x)) + self.skip(x))


class SmallResNet(nn.Module):
    def __init__(self, head_norm: bool = False):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, 1, 1)
        self.stage1 = nn.Sequential(Block(8, 8, 1), Block(8, 8, 1))
        self.stage2 = nn.Sequential(Block(8, 16, 2), Block(16, 16, 1))
        self.stage3 = nn.Sequential(Block(16, 32, 2), Block(32, 32, 1))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.norm = nn.LayerNorm(32) if head_norm else nn.Identity()
        self.fc = nn.Linear(32, 3)

    def forward(self, x):
        return self.fc(self.norm(self.pool(self.stage3(self.stage2(self.stage1(self.stem(x))))).flatten(1)))


def test_a_cnn_gets_its_stages_and_the_gap_classifier():
    layers = detect_image_layers(SmallResNet().eval(), torch.randn(2, 3, 32, 32))
    assert layers.conv_layers == ["stage1", "stage2", "stage3"]
    assert layers.last_conv == "stage3" and layers.layouts == {} and layers.gap_classifier == "fc"


def test_no_gap_classifier_when_something_sits_between_pooling_and_the_linear_layer():
    layers = detect_image_layers(SmallResNet(head_norm=True).eval(), torch.randn(2, 3, 32, 32))
    assert layers.last_conv == "stage3" and layers.gap_classifier is None


class TinyViT(nn.Module):
    """Patch embedding, class token, two blocks, a head on the class token."""

    def __init__(self):
        super().__init__()
        self.patch = nn.Conv2d(3, 16, 8, 8)
        self.cls = nn.Parameter(torch.zeros(1, 1, 16))
        self.blocks = nn.Sequential(*(nn.TransformerEncoderLayer(16, 2, 32, 0.0, batch_first=True) for _ in range(2)))
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        t = self.patch(x).flatten(2).transpose(1, 2)
        t = torch.cat([self.cls.expand(len(x), -1, -1), t], dim=1)
        return self.head(self.blocks(t)[:, 0])


def test_a_vision_transformer_gets_its_blocks_but_not_the_last_one():
    """The head reads the class token only, so the last block's patch tokens never reach the logits."""
    layers = detect_image_layers(TinyViT().eval(), torch.randn(2, 3, 32, 32))
    assert layers.conv_layers == ["patch", "blocks.0"]
    assert layers.last_conv == "blocks.0"
    layout = layers.layouts["blocks.0"]
    assert (layout.kind, layout.prefix, layout.grid) == ("tokens", 1, (4, 4))
    assert layers.gap_classifier is None


class BagOfWords(nn.Module):
    def __init__(self):
        super().__init__()
        self.positions = nn.Embedding(64, 8)
        self.words = nn.Embedding(100, 8, padding_idx=0)
        self.fc = nn.Linear(8, 2)

    def forward(self, ids):
        pos = self.positions(torch.arange(ids.shape[1]).expand_as(ids))
        return self.fc((self.words(ids) + pos).mean(1))


def test_a_text_model_gets_the_embedding_that_reads_the_ids():
    layers = detect_text_layers(BagOfWords().eval(), torch.tensor([[5, 6, 7, 0], [8, 9, 0, 0]]))
    assert layers.embedding == "words" and layers.attention == []
