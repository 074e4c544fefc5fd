"""The background process behind `realbench vphone up`: hosts N phones until told to stop.

    python -m devices.virtual.serve --n 4 --drift mild --screens auto

Prints one JSON line (the host's control URL and the phones) on stdout once every phone listens,
then serves until SIGTERM/SIGINT or `POST /shutdown` on the control channel.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys

from devices.virtual.host import VirtualPhoneHost
from realbench.errors import RealbenchError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="devices.virtual.serve")
    parser.add_argument("--n", type=int, default=1)
    parser.add_argument("--drift", default="none")
    parser.add_argument("--apps", default="", help="comma-separated package names")
    parser.add_argument("--screens", default="auto", choices=["auto", "clone", "static"])
    parser.add_argument("--profile", default=None)
    parser.add_argument("--faults", default="{}", help="JSON object of Faults fields")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )

    host = VirtualPhoneHost()
    try:
        infos = host.start(
            args.n,
            drift=args.drift,
            apps=[a for a in args.apps.split(",") if a] or None,
            faults=json.loads(args.faults),
            screens=args.screens,
            profile=args.profile,
        )
    except RealbenchError as exc:
        print(json.dumps({"error": str(exc)}), flush=True)
        host.stop()
        return 2
    ready = {"pid": os.getpid(), "control_url": host.control.url, "phones": [i.model_dump() for i in infos]}
    print(json.dumps(ready), flush=True)
    # The parent stops reading after the ready line; later writes must not hit a closed pipe.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())

    # The handler only flips a flag: Event.set() in a handler can deadlock on the lock that the
    # interrupted Event.wait() holds.
    signalled: list[int] = []

    def on_signal(signo: int, _frame: object) -> None:
        signalled.append(signo)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    while not signalled and not host.stopped.wait(0.2):
        pass
    host.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
