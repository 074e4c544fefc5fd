"""One HTTP client per process for the many small calls to local services (the clone server's API
from virtual phones and clone-on-phone targets).

`httpx.request` builds a new client for every call, and each client loads the system's CA bundle
into a fresh SSL context even for plain-HTTP loopback calls: about 20 ms of CPU a call, a tenth of
a virtual-phone episode's. A shared client also keeps connections alive between calls. Keyed by
process, so a forked worker never reuses its parent's sockets.
"""

from __future__ import annotations

import os
import threading

import httpx

_clients: dict[int, httpx.Client] = {}
_lock = threading.Lock()


def shared_client() -> httpx.Client:
    """This process's client (thread-safe; each call passes its own timeout and headers)."""
    pid = os.getpid()
    with _lock:
        client = _clients.get(pid)
        if client is None or client.is_closed:
            client = _clients[pid] = httpx.Client()
        return client
