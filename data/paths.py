"""Where xaidash keeps downloaded data sets."""

from __future__ import annotations

import os
from pathlib import Path


def cache_home() -> Path:
    """The user's cache folder (XDG_CACHE_HOME or ~/.cache) with an xaidash sub-folder."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "xaidash"


def data_root() -> Path:
    """Folder holding downloaded data sets: $XAIDASH_DATA, else ~/.cache/xaidash/data."""
    env = os.environ.get("XAIDASH_DATA")
    return Path(env).expanduser() if env else cache_home() / "data"


def offline() -> bool:
    """True when downloads must not be tried (XAIDASH_OFFLINE=1 or HF_HUB_OFFLINE=1)."""
    return any(os.environ.get(k, "") in ("1", "true", "yes") for k in ("XAIDASH_OFFLINE", "HF_HUB_OFFLINE"))


def is_file(path: Path) -> bool:
    """Whether `path` names a file; False for what no file can be called (a name over the system's limit, a
    NUL byte), which `Path.is_file` raises on instead of answering."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False
