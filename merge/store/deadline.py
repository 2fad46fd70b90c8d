"""A client-side deadline on a database server's answers: what ends a wait on a server gone silent.

A server can stop answering in the middle of a session: its backend stopped (``SIGSTOP``, a
debugger) or stuck, its host hung, or a network that drops packets. On TCP, keepalives and
``tcp_user_timeout`` end a wait on a host that has gone away, after their own delays; nothing
ends it on a process that is merely stopped, whose kernel still acknowledges every segment and
probe, nor on a Unix socket. A server-side ``statement_timeout`` is enforced by the very process
that is stopped, and a cancel request is delivered to it too. Only the client can give up.
:class:`Watchdog` does, for a driver that waits on a socket (psycopg): while a round trip is in
flight, a thread of its own watches the clock, and past the deadline it shuts the socket down;
the driver's wait then returns at once with "connection closed", and the connection is broken
(the store connects again on its next call).
"""

from __future__ import annotations

import socket
import threading
import time
from contextlib import suppress

__all__ = ["Watchdog"]


class Watchdog:
    """Shuts a socket down when the answer it waits for is later than ``seconds``.

    ``arm(sock)`` before a round trip, ``disarm()`` after it; :attr:`fired` tells whether the
    last armed round trip was cut off. ``sock`` is a duplicate of the driver's descriptor,
    owned by the caller and closed only while disarmed: ``shutdown(2)`` acts on the connection
    shared by both descriptors, and the number cut off is never one the process has since
    reused for another file. One thread, started at the first arm; while disarmed it wakes every
    ``seconds`` only (arming never wakes it: a deadline armed while it sleeps idle is never
    nearer than the end of that sleep). ``stop()`` ends it.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        #: Whether the last armed round trip was cut off (cleared by the next ``arm``).
        self.fired = False
        self._wake = threading.Condition()
        self._socket: socket.socket | None = None  # armed: the socket to cut off at the deadline
        self._deadline = 0.0
        self._stopped = False
        self._thread: threading.Thread | None = None

    def arm(self, sock: socket.socket) -> None:
        """Start the clock: ``sock`` is cut off unless :meth:`disarm` comes within ``seconds``."""
        with self._wake:
            self._socket, self._deadline, self.fired = sock, time.monotonic() + self.seconds, False
            # Also after a fork: the child has no thread of its parent.
            if not self._stopped and (self._thread is None or not self._thread.is_alive()):
                self._thread = threading.Thread(
                    target=self._watch, name="pith-merge store: answer deadline", daemon=True
                )
                self._thread.start()

    def disarm(self) -> None:
        """The answer came (or the round trip failed): nothing is cut off after this returns."""
        with self._wake:
            self._socket = None

    def stop(self) -> None:
        """End the thread, for good (its owner is closed). Idempotent."""
        with self._wake:
            self._socket = None
            self._stopped = True
            self._wake.notify()

    def _watch(self) -> None:
        with self._wake:
            while not self._stopped:
                if self._socket is None:
                    self._wake.wait(self.seconds)
                    continue
                left = self._deadline - time.monotonic()
                if left > 0:
                    self._wake.wait(left)
                    continue
                with suppress(OSError):  # already closed by the driver: nothing is waiting on it
                    self._socket.shutdown(socket.SHUT_RDWR)
                self._socket = None
                self.fired = True
