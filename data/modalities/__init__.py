"""Modalities: what kind of input a model reads (images, texts, a language model's prompts), each one adapter.

An adapter declares, once, what every other module needs to know about its kind of input: what one feature of a
map is (`unit`), how raw inputs become one batch and the tensor the model reads (`batch`, `prepare`), which
training augmentations apply, whether inputs lie on a 2-D grid (feature maps, filters, receptive fields), how a
data set's samples and their ground truth are read. Its explaining half (how a feature is hidden, how a map is
drawn, which metrics apply) is `xaidash.explainers.modalities`, which extends these same classes.

No code outside the adapters branches on a modality's name: it asks `modality_of(name)`. A new kind of input is one
adapter here (plus its explaining half), its data sets and its models.
"""

from xaidash.data.modalities.base import MODALITIES, GroundTruth, Modality, modality_of
from xaidash.data.modalities.graph import GRAPH, GraphModality
from xaidash.data.modalities.image import IMAGE, ImageModality
from xaidash.data.modalities.prompt import PROMPT, PromptModality
from xaidash.data.modalities.series import SERIES, SeriesModality
from xaidash.data.modalities.table import TABLE, TableModality
from xaidash.data.modalities.text import TEXT, TextModality

__all__ = [
    "GRAPH",
    "IMAGE",
    "MODALITIES",
    "PROMPT",
    "SERIES",
    "TABLE",
    "TEXT",
    "GraphModality",
    "GroundTruth",
    "ImageModality",
    "Modality",
    "PromptModality",
    "SeriesModality",
    "TableModality",
    "TextModality",
    "modality_of",
]
