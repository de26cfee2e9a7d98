"""The time limit on policy calls: interrupts on the main thread, late calls elsewhere, and
a caller's own SIGALRM timer left as it was."""

import signal
import threading
import time

import pytest

from metaeval.runs.time_limit import PolicyTimeout, limited, time_limit


def _sleep(seconds):
    with limited():
        time.sleep(seconds)


@pytest.mark.parametrize("body", ["sleep", "busy", "swallowing"])
def test_a_call_past_its_limit_is_interrupted(body):
    def call():
        end = time.monotonic() + 30
        while time.monotonic() < end:
            try:
                time.sleep(30) if body != "busy" else sum(range(1000))
            except Exception:  # noqa: BLE001
                if body != "swallowing":
                    raise

    start = time.monotonic()
    with time_limit(0.5), pytest.raises(PolicyTimeout, match=r"^no answer within 0.5 s$"):
        with limited():
            call()
    assert time.monotonic() - start < 5


def test_calls_within_the_limit_and_outside_a_limited_block_are_untouched():
    with time_limit(5):
        for _ in range(3):
            _sleep(0.01)
    _sleep(0.01)  # no limit in force: nothing armed
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_a_callers_alarm_handler_and_timer_are_put_back():
    fired = []
    previous = signal.signal(signal.SIGALRM, lambda *_: fired.append(True))
    try:
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        with time_limit(5):
            _sleep(0.1)
        remaining, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 0.5 < remaining < 0.95
        time.sleep(1.5)
        assert fired == [True]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_off_the_main_thread_a_late_call_fails_as_it_returns():
    outcome = []

    def build():
        with time_limit(0.2):
            try:
                _sleep(0.5)
            except PolicyTimeout as exc:
                outcome.append(str(exc))

    thread = threading.Thread(target=build)
    thread.start()
    thread.join(10)
    assert outcome == ["no answer within 0.2 s"]
