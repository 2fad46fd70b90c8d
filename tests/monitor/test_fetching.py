"""The HTTP client against a real server on 127.0.0.1 that misbehaves on purpose."""

from __future__ import annotations

import threading
import time

import pytest

from merge.monitor import Fetcher, FetchPolicy

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


def test_a_conditional_get_reuses_the_body_on_304(fetcher: Fetcher, served: Registry) -> None:
    first = fetcher.get(served.url + PATH)
    second = fetcher.get(served.url + PATH)
    assert (second.status, second.body, second.fresh) == ("ok", first.body, False)
    etag = served.requests[1].headers.get("If-None-Match")
    assert etag is not None
    assert etag.startswith('"')
    served.publish(PATH, snapshot("v2"))  # changed: a new ETag, a new body
    third = fetcher.get(served.url + PATH)
    assert (third.body, third.fresh) == (snapshot("v2"), True)


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
