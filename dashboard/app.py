"""xaidash: the Streamlit entry point (`xaidash serve`, or `streamlit run dashboard/app.py`).

Sets up the page, the navigation (pages listed in dashboard/nav.py) and the sidebar, then runs
the chosen page; an error a page does not handle becomes a message, not a traceback.
"""
from __future__ import annotations

import sys
from pathlib import Path

# `streamlit run dashboard/app.py` from a checkout that is not pip-installed: make the packages importable.
_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(1, _ROOT)

import streamlit as st  # noqa: E402

from dashboard.errors import show_error  # noqa: E402
from dashboard.nav import build_pages  # noqa: E402
from dashboard.sidebar import render_sidebar  # noqa: E402

st.set_page_config(page_title="xaidash", page_icon=":mag:", layout="wide")
page = st.navigation(build_pages())
try:
    render_sidebar()
except Exception as e:  # noqa: BLE001 - the page must still work when the sidebar cannot be drawn
    with st.sidebar:
        show_error(e, "Sidebar")
try:
    page.run()
except Exception as e:  # noqa: BLE001 - Streamlit's rerun/stop signals are BaseExceptions and pass through
    show_error(e, page.title)
