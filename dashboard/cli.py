"""The `xaidash` command: each layer adds its subcommands; `serve` starts the Streamlit app."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

APP = Path(__file__).resolve().parent / "app.py"
MAX_UPLOAD_MB = 50


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


def _cmd_serve(args: argparse.Namespace) -> int:
    cmd = serve_command(args.host, args.port, headless=not args.open_browser)
    print(f"xaidash: http://{args.host}:{args.port}  (Ctrl-C to stop)", file=sys.stderr)
    try:
        return subprocess.call(cmd, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    except KeyboardInterrupt:
        return 0


def build_parser() -> argparse.ArgumentParser:
    from xaidash.data.cli import add_commands as data_commands
    from xaidash.explainers.cli import add_commands as explain_commands
    from xaidash.models.cli import add_commands as model_commands

    parser = argparse.ArgumentParser(prog="xaidash", description="Train PyTorch models and look inside them.")
    sub = parser.add_subparsers(dest="command", required=True)
    data_commands(sub)
    model_commands(sub)
    explain_commands(sub)
    s = sub.add_parser("serve", help="start the dashboard in the browser")
    s.add_argument("--host", default="127.0.0.1", help="address to bind (0.0.0.0 exposes it to your network)")
    s.add_argument("--port", type=int, default=8501)
    s.add_argument("--open-browser", action="store_true", help="open a browser tab")
    s.set_defaults(func=_cmd_serve)
    return parser


def main(argv: list[str] | None = None) -> int:
    from xaidash.data.errors import XaidashError

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except XaidashError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `xaidash methods | head`: the reader left, nothing to report
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
