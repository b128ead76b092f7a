"""Modality adapters, explaining half: how each kind of input is read, turned into maps, drawn and scored (see
`base.ExplainingModality`). `adapter_of(name)` is the one way to reach one; importing this package registers them."""

from xaidash.explainers.modalities.base import ADAPTERS, Drawing, ExplainingModality, Maps, adapter_of
from xaidash.explainers.modalities.graph import GRAPH_ADAPTER
from xaidash.explainers.modalities.image import IMAGE_ADAPTER
from xaidash.explainers.modalities.prompt import PROMPT_ADAPTER
from xaidash.explainers.modalities.series import SERIES_ADAPTER
from xaidash.explainers.modalities.table import TABLE_ADAPTER
from xaidash.explainers.modalities.text import TEXT_ADAPTER

__all__ = [
    "ADAPTERS",
    "GRAPH_ADAPTER",
    "IMAGE_ADAPTER",
    "PROMPT_ADAPTER",
    "SERIES_ADAPTER",
    "TABLE_ADAPTER",
    "TEXT_ADAPTER",
    "Drawing",
    "ExplainingModality",
    "Maps",
    "adapter_of",
]
