"""Run the service: ``python -m examples.service --server granian --store events.db --keys keys.json``.

``--server granian`` (a threaded WSGI server whose HTTP layer is Rust: ``--threads`` Python
threads call the application, in one worker process that granian forks, so the service is one
process group, stopped or killed as one; the lightest of the three, docs/performance.md),
``waitress`` (a threaded WSGI server, pure Python, ``--threads`` request threads) or ``uvicorn``
(ASGI, one event loop, ``--threads`` worker threads; uvloop and httptools, C, when installed);
``--store``: a path or store URL
(``sqlite:///…``, ``postgresql://…``), opened once; ``--keys``: a JSON file of key objects.
Prints ``listening on http://HOST:PORT`` once it accepts connections (``--port 0``: any free
port). Needs the ``service`` extra: ``pip install 'pith-merge[service]'``.
"""

from __future__ import annotations

import argparse
import json
import socket
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from merge import KeySet, MergeError
from merge.store import open_store

from .app import Service, asgi_app, wsgi_app


def listen(host: str, port: int) -> socket.socket:
    """A listening socket with TCP_NODELAY, which every connection accepted from it inherits
    (Linux): a response written in two parts (headers, body) would otherwise wait for the
    client's delayed ACK, 40 ms each. asyncio's transports do not set it on the connections of a
    socket handed over to them, and granian sets it on none of its connections."""
    listening = socket.create_server((host, port), backlog=1024)
    listening.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return listening


def granian_app(store: str, keys: Path) -> Any:
    """The WSGI application granian's worker process runs: the service made there (its store
    opened after the fork, not shared with the parent)."""
    return wsgi_app(Service(open_store(store), keys=json.loads(keys.read_bytes())))


def serve_granian(listening: socket.socket, load: Callable[[], Any], threads: int) -> None:
    """Serve on granian: one worker process whose ``threads`` Python threads call the WSGI
    application that ``load()`` makes there (its HTTP layer Rust, off the GIL), on ``listening``."""
    from granian._granian import SocketHolder
    from granian.constants import Interfaces
    from granian.log import LogLevels
    from granian.server import Server

    class Granian(Server):  # type: ignore[misc, valid-type]
        """granian's server on a socket of ours (NODELAY set, bound before it starts, so that
        ``--port 0`` is known): how granian shares its socket with its workers where it does
        not bind one in each (its macOS and Windows road)."""

        def _init_shared_socket(self) -> None:
            self._ssp, self._sfd = None, listening.fileno()
            # (fd, a Unix socket?, backlog: its stub names no constructor)
            self._shd = SocketHolder(listening.fileno(), False, 1024)  # type: ignore[call-arg]
            listening.set_inheritable(True)
            self._sso = listening

    Granian(
        "examples.service:app",  # (a name only: the application comes from the loader below)
        interface=Interfaces.WSGI,
        workers=1,
        blocking_threads=threads,
        log_level=LogLevels.error,  # (it warns of more Python threads than 2 x cores + 1)
    ).serve(target_loader=load, wrap_loader=False)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m examples.service", description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", choices=["granian", "waitress", "uvicorn"], default="granian")
    parser.add_argument("--store", required=True, help="a path or a store URL")
    parser.add_argument("--keys", required=True, type=Path, help="a JSON file of key objects")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--threads", type=int, default=8)
    options = parser.parse_args()
    # A store or a key file that cannot be opened fails this command with one line, before it
    # serves (granian's: before its worker is forked, which opens its own store).
    try:
        document = json.loads(options.keys.read_bytes())
    except (OSError, ValueError) as error:  # (ValueError: not JSON, or not UTF-8)
        parser.exit(2, f"{parser.prog}: error: {options.keys}: not a JSON file of key objects ({error})\n")
    try:
        keys = KeySet.parse(document)
        store = open_store(options.store)
        if options.server == "granian":
            # (Not a whole Service: it would list the store's subjects, which the worker does.)
            store.close()
        else:
            service = Service(store, keys=keys)
    except MergeError as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    if options.server == "granian":
        listening = listen(options.host, options.port)
        print(f"listening on http://{options.host}:{listening.getsockname()[1]}", flush=True)
        serve_granian(listening, partial(granian_app, options.store, options.keys), options.threads)
        return
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

        listening = listen(options.host, options.port)
        port = listening.getsockname()[1]
        config = uvicorn.Config(
            asgi_app(service, workers=options.threads), lifespan="on", log_level="warning", access_log=False
        )
        print(f"listening on http://{options.host}:{port}", flush=True)  # (connections wait in the backlog)
        uvicorn.Server(config).run(sockets=[listening])


if __name__ == "__main__":
    main()
