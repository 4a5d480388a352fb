"""Serve a directory over HTTP on 127.0.0.1 (a stand-in for a conda channel mirror)."""

from __future__ import annotations

import base64
import functools
import http.server
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


class _Handler(http.server.SimpleHTTPRequestHandler):
    required_auth: str | None = None
    seen_paths: list[str]

    def do_GET(self) -> None:  # noqa: N802 - http.server API
        self.seen_paths.append(self.path)
        if self.required_auth and self.headers.get("Authorization") != self.required_auth:
            self.send_error(401, "credentials required")
            return
        super().do_GET()

    def log_message(self, *args) -> None:
        pass


@contextmanager
def serve(directory: Path, user: str | None = None, password: str | None = None) -> Iterator[tuple[int, list[str]]]:
    """(port, paths requested) while the server runs; with user/password it demands Basic auth."""
    seen: list[str] = []
    auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode() if user else None
    handler = type("Handler", (_Handler,), {"required_auth": auth, "seen_paths": seen})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(directory)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], seen
    finally:
        server.shutdown()
        server.server_close()
