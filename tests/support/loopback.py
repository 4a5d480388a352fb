"""A threaded HTTP(S) server on 127.0.0.1 for the test doubles (registry proxy, token service,
Harbor double): started on a free port, stopped and joined by its owner."""

from __future__ import annotations

import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class LoopbackServer:
    def __init__(self, handler: type[BaseHTTPRequestHandler], tls: tuple[Path, Path] | None = None) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        if tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)
