"""Who may use the dashboard: a token when it is reachable beyond this machine, and only known Host names.

`xaidash serve` binds to localhost by default. Bound to any other address, anyone who can reach the port
could train, delete and read runs, so serve then requires a token (given with --token or XAIDASH_TOKEN,
else generated and printed) and passes it to the app in XAIDASH_TOKEN. The app asks for it once per
browser session (a `?token=` link works too) and shows nothing else until it is given.

DNS rebinding: a web page on another site can make a browser reach 127.0.0.1 under the attacker's host
name. Streamlit accepts any Host header, so the app checks it (XAIDASH_ALLOWED_HOSTS, set by serve to the
bound address and the local names) and draws nothing for another name. Written here because Streamlit
has no host allow-list or authentication of its own.
"""

from __future__ import annotations

import hmac
import os
import socket

TOKEN_ENV = "XAIDASH_TOKEN"
HOSTS_ENV = "XAIDASH_ALLOWED_HOSTS"  # comma-separated; '*' or unset: any
LOCAL_NAMES = ("localhost", "127.0.0.1", "::1")
SESSION_KEY = "xaidash_authenticated"


def is_local(address: str) -> bool:
    return address in LOCAL_NAMES or address.startswith("127.")


def allowed_hosts(bound: str) -> list[str] | None:
    """The Host names the app answers when bound to `bound`; None: any (bound to every interface, where the
    token protects it)."""
    if bound in ("0.0.0.0", "::", ""):
        return None
    names = {*LOCAL_NAMES, bound}
    if not is_local(bound):
        names |= {socket.gethostname(), socket.getfqdn()}
    return sorted(names)


def host_name(header: str) -> str:
    """'example.org:8501' -> 'example.org'; '[::1]:8501' -> '::1'."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def host_allowed(header: str | None, allowed: str | None) -> bool:
    """Whether a request's Host header is one of the allowed names (a missing header passes: no browser omits it,
    and in-process test harnesses send none)."""
    if not header or not allowed or allowed.strip() == "*":
        return True
    return host_name(header) in {h.strip().lower() for h in allowed.split(",") if h.strip()}


def token_matches(given: str | None, expected: str) -> bool:
    return bool(given) and hmac.compare_digest(str(given).encode(), expected.encode())


def required_token() -> str | None:
    return os.environ.get(TOKEN_ENV) or None


def gate() -> None:
    """In the app, before anything is drawn: refuse unknown Host names; ask for the token when one is required.
    Stops the script run (st.stop) until access is granted."""
    import streamlit as st

    host = st.context.headers.get("Host") if st.context.headers else None
    if not host_allowed(host, os.environ.get(HOSTS_ENV)):
        st.error(
            f"This dashboard does not answer to the host name {host_name(host or '')!r}. Open it at the address "
            "`xaidash serve` printed."
        )
        st.stop()
    expected = required_token()
    if expected is None or st.session_state.get(SESSION_KEY):
        return
    if token_matches(st.query_params.get("token"), expected):
        st.session_state[SESSION_KEY] = True
        del st.query_params["token"]  # keep it out of the address bar and of links copied from it
        return
    st.title("xaidash")
    st.info("This dashboard is reachable from the network, so it needs the access token `xaidash serve` printed.")
    with st.form("xaidash_token"):
        given = st.text_input("Access token", type="password")
        if st.form_submit_button("Open") and given:
            if token_matches(given, expected):
                st.session_state[SESSION_KEY] = True
                st.rerun()
            st.error("That is not the token. Ask whoever started the server for it.")
    st.stop()
