"""xaidash: the Streamlit entry point (`xaidash serve`, or `streamlit run dashboard/app.py` with xaidash installed).

Sets up the page, the navigation (pages listed in dashboard/nav.py, grouped by section) and the sidebar, then runs
the chosen page; an error a page does not handle becomes a message, not a traceback.

Streamlit runs this file as the `__main__` module (it installs the script's module in `sys.modules`). A training
job's child process (`models/training/process.py`, multiprocessing's spawn) therefore re-imports this file, as
`__mp_main__`, before it trains: there it must draw nothing (it has no browser session; drawing there filled the
server log with "missing ScriptRunContext" and "use `streamlit run`" warnings and cost seconds per run), and it
imports nothing beyond the standard library.
"""

from __future__ import annotations

IN_TRAINING_CHILD = __name__ == "__mp_main__"


def main() -> None:
    import warnings

    import streamlit as st

    from xaidash.data.notes import DataNote

    # A data set's notes reach the user in a warning box (dashboard/errors.show_notes, which collects them); one
    # raised where no page collects it is not printed to the server log as a Python warning with a source path.
    warnings.filterwarnings("ignore", category=DataNote)

    from xaidash.dashboard.access import gate
    from xaidash.dashboard.errors import show_error
    from xaidash.dashboard.nav import build_pages
    from xaidash.dashboard.sidebar import render_sidebar
    from xaidash.dashboard.state import apply_run_link

    st.set_page_config(page_title="xaidash", page_icon=":mag:", layout="wide")
    gate()  # unknown Host names and, when the server is reachable from the network, sessions without the token
    page = st.navigation(build_pages(), expanded=True)  # every section's pages, none behind “View more”
    apply_run_link()
    try:
        render_sidebar()
    except Exception as e:  # noqa: BLE001 - the page must still work when the sidebar cannot be drawn
        with st.sidebar:
            show_error(e, "Sidebar")
    try:
        page.run()
    except Exception as e:  # noqa: BLE001 - Streamlit's rerun/stop signals are BaseExceptions and pass through
        show_error(e, page.title)


if not IN_TRAINING_CHILD:
    main()
