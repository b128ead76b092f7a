"""`xaidash serve` stops the Streamlit server it started when it is told to stop (SIGTERM, Ctrl-C, SIGHUP),
so the port is free again: a real `xaidash serve` process, its real child, a real port."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the server's child process through /proc")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_is_free(port: int) -> bool:
    """Whether a new server could listen on the port (as servers do, with SO_REUSEADDR: connections the old
    server closed may linger in TIME_WAIT, and they do not stop a new server)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def children(pid: int) -> list[int]:
    """Processes whose parent is `pid` (field 4 of /proc/<pid>/stat, after the command name in parentheses)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_until(predicate, timeout: float) -> bool:
    end = time.time() + timeout
    while time.time() < end:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


@pytest.mark.slow  # starts a fresh interpreter and a Streamlit server per signal
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=["SIGTERM", "SIGINT", "SIGHUP"])
def test_serve_stops_its_streamlit_child_and_frees_the_port(signum, tmp_path):
    port = free_port()
    log = open(tmp_path / "serve.log", "w")  # noqa: SIM115 - closed below, after the process ends
    proc = subprocess.Popen(
        [sys.executable, "-m", "xaidash.dashboard.cli", "serve", "--port", str(port)],
        env={**os.environ, "XAIDASH_RUNS": str(tmp_path / "runs")},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:

        def healthy() -> bool:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1)
                return True
            except OSError:
                return False

        assert wait_until(lambda: healthy() or proc.poll() is not None, 60), "server did not answer in time"
        assert proc.poll() is None, (tmp_path / "serve.log").read_text()
        kids = children(proc.pid)
        assert kids, "xaidash serve has no child process"
        proc.send_signal(signum)
        assert proc.wait(15) == 0
        assert wait_until(lambda: not any(alive(k) for k in kids), 5), "the Streamlit child outlived xaidash serve"
        assert wait_until(lambda: port_is_free(port), 5), f"port {port} is still taken"
        assert "stopping the server" in (tmp_path / "serve.log").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()


@pytest.mark.slow  # a fresh interpreter
def test_serve_starts_streamlit_without_importing_torch_first():
    """`xaidash serve` parses its own arguments only: the other commands import torch, seconds on a small CPU
    before the server could even start."""
    code = (
        "import sys\n"
        "from xaidash.dashboard import cli\n"
        "args = cli.serve_parser().parse_args(['serve', '--port', '9'])\n"
        "assert args.port == 9 and args.func is cli._cmd_serve\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
