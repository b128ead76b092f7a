"""Bring your own model: import a model trained elsewhere as a run (`xaidash import SOURCE`).

Each `*_source.py` module in this package registers one kind of source (`hf:`, `timm:`, `torchvision:`,
`module:`, `zoo:`); adding a source is adding such a file.
"""

import importlib
import pkgutil

from xaidash.models.external.options import ImportOptions
from xaidash.models.external.registry import ImportSource, list_sources, parse_source
from xaidash.models.external.runs import Imported, describe, import_model

for _module in pkgutil.iter_modules(__path__):
    if _module.name.endswith("_source"):
        importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["ImportOptions", "ImportSource", "Imported", "describe", "import_model", "list_sources", "parse_source"]
