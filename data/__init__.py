"""Data sets: a registry of image and text data sets, their loaders and tokenizers."""

from xaidash.data import sets as _sets  # noqa: F401  (registers every data set)
from xaidash.data.errors import DatasetError, DatasetUnavailable
from xaidash.data.paths import data_root
from xaidash.data.registry import (
    DatasetInfo,
    DatasetSource,
    ImageSplit,
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
    "TextSplit",
    "data_root",
    "get_info",
    "get_source",
    "list_datasets",
    "load_split",
]
