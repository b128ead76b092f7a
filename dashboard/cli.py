"""The `xaidash` command: each layer adds its subcommands; `serve` starts the Streamlit app."""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import ipaddress
import os
import re
import secrets
import signal
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

APP = Path(__file__).resolve().parent / "app.py"
MAX_UPLOAD_MB = 50
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
GRACE_S = 10.0  # how long the server may take to shut down before it is killed


def serve_command(host: str, port: int, headless: bool = True) -> list[str]:
    """The streamlit command line for the app (binds to localhost unless told otherwise)."""
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(APP),
        "--server.address",
        host,
        "--server.port",
        str(port),
        "--server.headless",
        "true" if headless else "false",
        "--server.maxUploadSize",
        str(MAX_UPLOAD_MB),
        "--browser.gatherUsageStats",
        "false",
        "--server.fileWatcherType",
        "none",
        "--theme.base",
        "light",
        "--client.toolbarMode",
        "minimal",  # no Deploy button or developer menu for users
    ]


class _StopRequested(Exception):
    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_stop(signum: int, frame: object) -> None:
    raise _StopRequested(signum)


@contextlib.contextmanager
def _stop_signals_raise() -> Iterator[None]:
    """While the block runs, SIGTERM, SIGINT and SIGHUP raise _StopRequested instead of ending the process."""
    previous = {s: signal.signal(s, _raise_stop) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _die_with_parent() -> None:
    """In the child, before exec (Linux): SIGTERM it when `xaidash serve` dies, even by SIGKILL."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG


def stop_child(child: subprocess.Popen, grace: float = GRACE_S) -> int:
    """Terminate the server, kill it if it has not exited after `grace` seconds, and reap it."""
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(grace)
        except subprocess.TimeoutExpired:
            child.kill()
    return child.wait()


def supervise(child: subprocess.Popen, grace: float = GRACE_S) -> int:
    """Wait for the server; on SIGTERM, SIGINT (Ctrl-C) or SIGHUP stop it and free its port. Its exit status,
    or 0 after a requested stop."""
    with _stop_signals_raise():
        try:
            return child.wait()
        except (_StopRequested, KeyboardInterrupt) as e:
            print(f"xaidash: stopping the server ({e or 'interrupt'})", file=sys.stderr)
        try:
            stop_child(child, grace)
        except _StopRequested:  # a second signal while stopping: no more waiting
            child.kill()
            child.wait()
    return 0


def access_env(host: str, token: str | None) -> tuple[dict[str, str], str | None]:
    """(environment for the app, the token to print): a token whenever the server is reachable beyond this
    machine (the one given, else a new random one), and the Host names the app answers (dashboard/access.py)."""
    from xaidash.dashboard.access import HOSTS_ENV, TOKEN_ENV, allowed_hosts, is_local

    env: dict[str, str] = {}
    hosts = allowed_hosts(host)
    env[HOSTS_ENV] = ",".join(hosts) if hosts else "*"
    token = token or os.environ.get(TOKEN_ENV) or None
    if token is None and not is_local(host):
        token = secrets.token_urlsafe(24)
    if token is not None:
        env[TOKEN_ENV] = token
    return env, token


def _cmd_serve(args: argparse.Namespace) -> int:
    cmd = serve_command(args.host, args.port, headless=not args.open_browser)
    access, token = access_env(args.host, args.token)
    url = f"http://{args.host}:{args.port}"
    if token is not None:
        url += f"/?token={token}"
        print(
            f"xaidash: WARNING: bound to {args.host}, so anyone who can reach port {args.port} could train, read and "
            "delete runs; the dashboard asks every browser session for this access token first:\n"
            f"  {token}",
            file=sys.stderr,
        )
    print(f"xaidash: {url}  (Ctrl-C to stop)", file=sys.stderr)
    child = subprocess.Popen(
        cmd,
        env={**os.environ, **access, "PYTHONUNBUFFERED": "1"},
        preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,  # the CLI has no threads yet
    )
    return supervise(child)


def build_parser() -> argparse.ArgumentParser:
    from xaidash.data.cli import add_commands as data_commands
    from xaidash.explainers.cli import add_commands as explain_commands
    from xaidash.explainers.concepts.cli import add_commands as concept_commands
    from xaidash.explainers.influence.cli import add_commands as influence_commands
    from xaidash.explainers.inspection.recurrent_cli import add_commands as recurrent_commands
    from xaidash.explainers.language.cli import add_commands as generate_commands
    from xaidash.explainers.language.sae_cli import add_commands as sae_commands
    from xaidash.explainers.language.steer_cli import add_commands as steer_commands
    from xaidash.explainers.robust.cli import add_commands as robust_commands
    from xaidash.explainers.scenes.cli import add_commands as scene_explain_commands
    from xaidash.explainers.scenes.compare_cli import add_compare_command as scene_compare_command
    from xaidash.explainers.tabular.cli import add_commands as global_commands
    from xaidash.models.cli import add_commands as model_commands
    from xaidash.models.external.cli import add_commands as import_commands
    from xaidash.models.scenes.cli import add_commands as scene_model_commands

    parser, sub = _root_parser()
    data_commands(sub)
    model_commands(sub)
    import_commands(sub)
    explain_commands(sub)
    generate_commands(sub)
    sae_commands(sub)
    steer_commands(sub)
    robust_commands(sub)
    concept_commands(sub)
    influence_commands(sub)
    global_commands(sub)
    recurrent_commands(sub)
    scenes = _add_scenes(sub)
    scene_model_commands(scenes)  # train, evaluate
    scene_explain_commands(scenes)  # explain
    scene_compare_command(scenes)  # compare
    _add_serve(sub)
    return parser


def _root_parser() -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    parser = argparse.ArgumentParser(prog="xaidash", description="Train PyTorch models and look inside them.")
    return parser, parser.add_subparsers(dest="command", required=True)


def _port(text: str) -> int:
    """`--port`'s type: 1..65535. Not xaidash.data.argtypes.int_range: importing xaidash.data loads torch, which
    `serve` must not wait for."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is out of range: it must be between 1 and 65535")
    return value


_HOSTNAME = re.compile(
    r"(?=.{1,253}\Z)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?\Z"
)


def _host(text: str) -> str:
    """`--host`'s type: an IP address or a host name (no lookup: that could wait on a resolver), so a typo is refused
    here in one line instead of in Streamlit's traceback after it started."""
    value = text.strip()
    try:
        return str(ipaddress.ip_address(value.strip("[]")))
    except ValueError:
        pass
    if not _HOSTNAME.match(value):
        raise argparse.ArgumentTypeError(f"{text[:60]!r} is not an IP address or a host name (e.g. 127.0.0.1, 0.0.0.0)")
    return value


def _add_scenes(sub: argparse._SubParsersAction) -> argparse._SubParsersAction:
    """`xaidash scenes ...`: one command for detection and segmentation, whose subcommands the models layer (train,
    evaluate) and the explainers layer (explain) add; its subparsers."""
    scenes = sub.add_parser(
        "scenes",
        help="detection and segmentation: train a detector or segmenter on scenes, evaluate it, explain its boxes",
        description="Detectors and segmenters: train (scenes, COCO files, mask folders), evaluate, explain per box "
        "or region.",
    )
    return scenes.add_subparsers(dest="scenes_command", required=True)


def _add_serve(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("serve", help="start the dashboard in the browser")
    s.add_argument(
        "--host", type=_host, default="127.0.0.1", help="address to bind (0.0.0.0 exposes it to your network)"
    )
    s.add_argument("--port", type=_port, default=8501)
    s.add_argument("--open-browser", action="store_true", help="open a browser tab")
    s.add_argument(
        "--token",
        help="access token each browser session must give (default: $XAIDASH_TOKEN; generated and printed when "
        "--host is not a localhost address)",
    )
    s.set_defaults(func=_cmd_serve)


def serve_parser() -> argparse.ArgumentParser:
    """The parser for `xaidash serve` alone: the other commands import torch, seconds on a small CPU that the
    server's start should not wait for (the app imports what it needs itself)."""
    parser, sub = _root_parser()
    _add_serve(sub)
    return parser


def _is_user_error(err: BaseException) -> bool:
    from xaidash.data.errors import XaidashError  # here, not at the top: importing xaidash.data loads torch

    return isinstance(err, XaidashError)


def _show_warning(
    message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None, line: Any = None
) -> None:
    """A warning in the command's own words: `warning: <message>` on stderr, without Python's source path, line
    number and class (a data set's notes, data/notes.py, and any library's warning alike)."""
    print(f"warning: {message}", file=file or sys.stderr)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = serve_parser() if argv[:1] == ["serve"] else build_parser()
    args = parser.parse_args(argv)
    with warnings.catch_warnings():  # restores Python's own display when main() returns (tests call it in-process)
        warnings.showwarning = _show_warning
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:  # `xaidash methods | head`: the reader left, nothing to report
        sys.stderr.close()
        return 0
    except Exception as e:
        if not _is_user_error(e):
            raise
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
