"""The Streamlit pages (run by path through dashboard/nav.py; a package so installs carry them)."""
