"""Run the service: ``python -m examples.service --server waitress --store events.db --keys keys.json``.

``--server waitress`` (a threaded WSGI server, ``--threads`` request threads) or ``uvicorn``
(ASGI, one event loop, ``--threads`` worker threads; uvloop and httptools, C, when installed:
the lighter of the two, docs/performance.md); ``--store``: a path or store URL
(``sqlite:///…``, ``postgresql://…``), opened once; ``--keys``: a JSON file of key objects.
Prints ``listening on http://HOST:PORT`` once it accepts connections (``--port 0``: any free
port). Needs the ``service`` extra: ``pip install 'pith-merge[service]'``.
"""

from __future__ import annotations

import argparse
import json
import socket
from pathlib import Path

from merge.store import open_store

from .app import Service, asgi_app, wsgi_app


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m examples.service", description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", choices=["waitress", "uvicorn"], default="waitress")
    parser.add_argument("--store", required=True, help="a path or a store URL")
    parser.add_argument("--keys", required=True, type=Path, help="a JSON file of key objects")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--threads", type=int, default=8)
    options = parser.parse_args()
    service = Service(open_store(options.store), keys=json.loads(options.keys.read_bytes()))
    if options.server == "waitress":
        import logging

        from waitress.server import create_server

        # (its warning of every request that waits for a thread: under load, every few requests)
        logging.getLogger("waitress.queue").setLevel(logging.ERROR)

        # waitress sets TCP_NODELAY on every connection by default (its socket_options).
        server = create_server(
            wsgi_app(service), host=options.host, port=options.port, threads=options.threads
        )
        print(f"listening on http://{options.host}:{server.effective_port}", flush=True)
        server.run()
    else:
        import uvicorn

        listening = socket.create_server((options.host, options.port))
        # Set here, inherited by every accepted connection (Linux): asyncio's transports do not
        # set it on the connections of a socket handed over, and a response written in two
        # parts (headers, body) would wait for the client's delayed ACK, 40 ms each.
        listening.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        port = listening.getsockname()[1]
        config = uvicorn.Config(
            asgi_app(service, workers=options.threads), lifespan="on", log_level="warning", access_log=False
        )
        print(f"listening on http://{options.host}:{port}", flush=True)  # (connections wait in the backlog)
        uvicorn.Server(config).run(sockets=[listening])


if __name__ == "__main__":
    main()
