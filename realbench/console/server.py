"""Serving the console app from a background thread (tests, benchmarks, screenshots)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

from realbench.errors import ServerError

START_TIMEOUT_S = 20.0


@contextlib.contextmanager
def serve_in_thread(app: Any, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Run `app` under uvicorn on host:port (0 = a free port); yields its base URL."""
    import uvicorn

    from realbench.console.security import CONSOLE_LIMITS
    from realbench.http_guard import server_config

    # The console's own limits: header deadline and connection caps as every realbench server.
    config = server_config(app, CONSOLE_LIMITS, host=host, port=port, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="console-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise ServerError("the console server did not start", hint="is the port free?")
        time.sleep(0.02)
    bound = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://{host}:{bound}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
