"""The HTTP client against a real server on 127.0.0.1 that misbehaves on purpose."""

from __future__ import annotations

import hashlib
import shutil
import ssl
import subprocess
import threading
import time
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from merge.monitor import Fetcher, FetchPolicy
from merge.monitor.fetching import Validator, retry_after, strong_last_modified

from .conftest import QUICK
from .history import LETTERS, snapshot
from .registry import Registry

PATH = f"/pith/{LETTERS}/bundle.json"


@pytest.fixture
def fetcher() -> Fetcher:
    made = Fetcher(QUICK)
    yield made
    made.close()


@pytest.fixture
def served(registry: Registry) -> Registry:
    registry.publish(PATH, snapshot("v1"))
    return registry


def test_a_document_is_fetched_whole(fetcher: Fetcher, served: Registry) -> None:
    answer = fetcher.get(served.url + PATH)
    assert (answer.status, answer.body, answer.fresh, answer.attempts) == ("ok", snapshot("v1"), True, 1)


def test_a_404_is_missing_and_not_tried_again(fetcher: Fetcher, served: Registry) -> None:
    served.misbehave[PATH] = "404"
    answer = fetcher.get(served.url + PATH)
    assert (answer.status, answer.attempts) == ("missing", 1)


def test_a_5xx_is_tried_again_then_fails(fetcher: Fetcher, served: Registry) -> None:
    served.misbehave[PATH] = "500"
    answer = fetcher.get(served.url + PATH)
    assert (answer.status, answer.reason, answer.attempts) == ("failed", "http_status", QUICK.retries + 1)
    assert served.paths_requested() == [PATH] * (QUICK.retries + 1)


def test_a_server_busy_for_a_while_is_waited_for(served: Registry) -> None:
    served.misbehave[PATH] = "flaky"  # 503 twice, then the file
    patient = Fetcher(FetchPolicy(retries=3, backoff=0.01, max_backoff=0.05, rate=0))
    try:
        answer = patient.get(served.url + PATH)
    finally:
        patient.close()
    assert (answer.status, answer.body, answer.attempts) == ("ok", snapshot("v1"), 3)


def test_a_slow_body_is_cut_off_at_the_timeout(fetcher: Fetcher, served: Registry) -> None:
    served.misbehave[PATH] = "slow"  # a byte every 0.2 s: each read is quick, the whole is not
    started = time.monotonic()
    answer = fetcher.get(served.url + PATH)
    assert (answer.status, answer.reason) == ("failed", "timeout")
    # Two attempts of at most timeout + one read each; bounded, whatever the body's length.
    assert time.monotonic() - started < (QUICK.retries + 1) * (QUICK.timeout + 0.5) + 1


def test_an_endless_body_stops_at_the_cap(served: Registry) -> None:
    served.misbehave[PATH] = "endless"
    capped = Fetcher(FetchPolicy(max_bytes=1_000_000, retries=0, rate=0))
    try:
        answer = capped.get(served.url + PATH)
    finally:
        capped.close()
    assert (answer.status, answer.reason) == ("failed", "too_large")


def test_a_body_that_says_it_is_huge_is_refused_before_it_is_read(fetcher: Fetcher, served: Registry) -> None:
    served.misbehave[PATH] = "huge"
    answer = fetcher.get(served.url + PATH)
    assert (answer.status, answer.reason, answer.attempts) == ("failed", "too_large", 1)


def test_a_redirect_loop_is_bounded(fetcher: Fetcher, served: Registry) -> None:
    served.misbehave[PATH] = "loop"
    answer = fetcher.get(served.url + PATH)
    assert (answer.status, answer.reason) == ("failed", "too_many_redirects")
    assert len(served.paths_requested()) == QUICK.max_redirects + 1


def test_a_redirect_to_another_scheme_is_not_followed(fetcher: Fetcher, served: Registry) -> None:
    served.misbehave[PATH] = "file"  # Location: file:///etc/passwd
    answer = fetcher.get(served.url + PATH)
    assert (answer.status, answer.reason, answer.body) == ("failed", "scheme", None)


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "ftp://127.0.0.1/x", "gopher://127.0.0.1/", "http:///x"]
)
def test_urls_of_other_schemes_are_never_read(fetcher: Fetcher, url: str) -> None:
    answer = fetcher.get(url)
    assert (answer.status, answer.reason, answer.attempts, answer.body) == ("failed", "scheme", 0, None)


def test_a_refused_connection_is_tried_again_then_fails(fetcher: Fetcher, served: Registry) -> None:
    url = served.url + PATH
    served.close()
    answer = fetcher.get(url)
    assert (answer.status, answer.reason, answer.attempts) == ("failed", "connect", QUICK.retries + 1)


def test_a_conditional_get_names_the_body_it_had_on_304(fetcher: Fetcher, served: Registry) -> None:
    first = fetcher.get(served.url + PATH)
    assert first.validator is not None
    assert first.sha256 == hashlib.sha256(snapshot("v1")).hexdigest() == first.validator.sha256
    second = fetcher.get(served.url + PATH, first.validator)
    assert (second.status, second.body, second.fresh, second.sha256) == ("ok", None, False, first.sha256)
    etag = served.requests[1].headers.get("If-None-Match")
    assert etag is not None
    assert etag == first.validator.etag
    assert etag.startswith('"')
    served.publish(PATH, snapshot("v2"))  # changed: a new ETag, a new body
    third = fetcher.get(served.url + PATH, first.validator)
    assert (third.body, third.fresh) == (snapshot("v2"), True)
    unconditional = fetcher.get(served.url + PATH)
    assert "If-None-Match" not in served.requests[-1].headers
    assert unconditional.body == snapshot("v2")


def test_a_last_modified_is_sent_back_as_if_modified_since(fetcher: Fetcher, served: Registry) -> None:
    known = Validator(None, "Wed, 21 Oct 2026 07:28:00 GMT", "0" * 64)
    fetcher.get(served.url + PATH, known)
    assert served.requests[-1].headers.get("If-Modified-Since") == known.last_modified


def test_a_last_modified_is_a_validator_only_a_minute_before_the_answer() -> None:
    """A date has a resolution of a second: a body changed within the second of an answer would
    be taken for the old one on If-Modified-Since (python -m http.server answers so)."""

    def strong(modified: str, date: str) -> str | None:
        return strong_last_modified({"Last-Modified": modified, "Date": date})

    assert strong("Sun, 09 Sep 2001 01:46:40 GMT", "Sun, 09 Sep 2001 01:47:40 GMT") is not None
    assert strong("Sun, 09 Sep 2001 01:46:40 GMT", "Sun, 09 Sep 2001 01:47:39 GMT") is None
    assert strong("Sun, 09 Sep 2001 01:46:40 GMT", "") is None
    assert strong("never", "Sun, 09 Sep 2001 01:47:40 GMT") is None


def test_connections_are_reused_even_after_404s(served: Registry) -> None:
    """Every body is read to its end (a 404's too), so a connection goes back to the pool: as
    many connections as requests in flight, not one a request (issue 40 item 3)."""
    pooled = Fetcher(FetchPolicy(rate=0, concurrency=2, retries=0))
    try:
        urls = [served.url + f"/pith/{index}.json" for index in range(30)]  # nothing there: 404
        answers = pooled.get_many([(url, None) for url in [*urls, served.url + PATH]])
    finally:
        pooled.close()
    assert [answer.status for answer in answers] == ["missing"] * 30 + ["ok"]
    assert served.connections <= 2


def test_a_kept_alive_connection_the_server_closed_is_replaced_in_the_same_attempt(served: Registry) -> None:
    """A server closes idle connections when it likes: the GET goes again on a new connection,
    not counted as a failed attempt (a retry would wait a backoff, and fail with retries=0)."""
    served.misbehave[PATH] = "hangup"
    once = Fetcher(FetchPolicy(rate=0, concurrency=1, retries=0))
    try:
        answers = [once.get(served.url + PATH) for _ in range(3)]
    finally:
        once.close()
    assert [(answer.status, answer.attempts) for answer in answers] == [("ok", 1)] * 3
    assert served.connections == 3


def test_retry_after_is_read_in_seconds_and_as_an_http_date() -> None:
    def asked(value: str) -> float:
        headers = Message()
        headers["retry-after"] = value  # looked up whatever its case, as http.client's answers are
        return retry_after(headers, now=1_000_000_000.0)

    assert asked("7") == 7.0
    assert asked("Sun, 09 Sep 2001 01:46:50 GMT") == 10.0  # 1_000_000_010
    assert asked("Sun, 09 Sep 2001 01:46:30 GMT") == 0.0  # past: no wait
    assert asked("soon") == 0.0


def test_the_rate_is_each_hosts_own() -> None:
    """``--rate`` is a host's (its name and port, in any case, without credentials): a mirror or
    a peer does not use up the registry's requests, nor the registry theirs."""
    rated = Fetcher(FetchPolicy(rate=5))
    try:
        registry = rated.rate_of("https://pith.example/pith/A/bundle.json")
        assert rated.rate_of("https://PITH.example/pith/B.json") is registry
        assert rated.rate_of("https://user@pith.example/pith/C.json") is registry
        assert rated.rate_of("https://pith.example:443/pith/D.json") is registry  # its port
        assert rated.rate_of("https://pith.example:8443/pith/A/bundle.json") is not registry
        assert rated.rate_of("https://mirror.example/pith/A/bundle.json") is not registry
    finally:
        rated.close()


def test_requests_are_spaced_by_the_rate(served: Registry) -> None:
    rated = Fetcher(FetchPolicy(rate=20, concurrency=4))
    try:
        rated.get_many([served.url + PATH] * 6)
    finally:
        rated.close()
    starts = sorted(request.started for request in served.requests)
    # 6 starts at 20 a second are spread over at least 5 spacings of 0.05 s (less a little slack).
    assert starts[-1] - starts[0] >= 5 * 0.05 * 0.8


def test_no_more_requests_in_flight_than_the_limit(served: Registry) -> None:
    served.misbehave[PATH] = "delay"  # each answer takes 0.3 s: requests overlap
    limited = Fetcher(FetchPolicy(rate=0, concurrency=2))
    try:
        answers = limited.get_many([served.url + PATH] * 6)
    finally:
        limited.close()
    assert all(answer.status == "ok" for answer in answers)
    assert served.most_in_flight == 2


def test_a_stop_ends_the_waits(served: Registry) -> None:
    served.misbehave[PATH] = "500"
    stop = threading.Event()
    waiting = Fetcher(FetchPolicy(retries=5, backoff=10, max_backoff=10, rate=0), stop)
    threading.Timer(0.2, stop.set).start()
    try:
        started = time.monotonic()
        answer = waiting.get(served.url + PATH)
    finally:
        waiting.close()
    assert answer.status == "failed"
    assert time.monotonic() - started < 5  # not the 10 s backoff


@pytest.mark.skipif(shutil.which("openssl") is None, reason="makes its certificate with the openssl command")
def test_an_https_server_whose_certificate_is_not_trusted_is_refused(tmp_path: Path) -> None:
    """TLS as httpx did it: the certificate checked against the trusted authorities (a
    self-signed one is not), so nothing of such a server is read."""
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    strict = Fetcher(FetchPolicy(rate=0, retries=0, timeout=5))
    try:
        answer = strict.get(f"https://127.0.0.1:{server.server_address[1]}{PATH}")
    finally:
        strict.close()
        server.shutdown()
        server.server_close()
    assert (answer.status, answer.reason, answer.body) == ("failed", "connect", None)
    assert "CERTIFICATE_VERIFY_FAILED" in answer.detail
