"""Data sets (a registry of them, their loaders and tokenizers), the modality adapters, and the spec base and
registry class every registry of every layer uses."""

from xaidash.data import modalities as _modalities  # noqa: F401  (registers every modality adapter)
from xaidash.data import sets as _sets  # noqa: F401  (registers every data set)
from xaidash.data.errors import DatasetError, DatasetUnavailable
from xaidash.data.paths import data_root
from xaidash.data.registry import (
    DatasetInfo,
    DatasetSource,
    ImageSplit,
    SeriesSplit,
    TextSplit,
    get_info,
    get_source,
    list_datasets,
    load_split,
)

__all__ = [
    "DatasetError",
    "DatasetInfo",
    "DatasetSource",
    "DatasetUnavailable",
    "ImageSplit",
    "SeriesSplit",
    "TextSplit",
    "data_root",
    "get_info",
    "get_source",
    "list_datasets",
    "load_split",
]
