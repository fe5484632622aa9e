"""The one backoff rule every retry loop waits by (ffwatchd/backoff.py), and the loops that use it."""

from __future__ import annotations

import itertools

import pytest

from ffwatchd.backoff import Backoff


def test_the_wait_doubles_from_the_first_up_to_the_cap() -> None:
    b = Backoff(first=0.5, cap=16.0)
    assert [b.delay(n) for n in range(1, 9)] == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 16.0, 16.0]
    assert list(itertools.islice(b.delays(), 4)) == [0.5, 1.0, 2.0, 4.0]
    assert b.delay(0) == 0.5, "no try failed yet counts as the first wait, never less"


def test_another_factor_and_a_first_wait_above_the_cap() -> None:
    assert [Backoff(first=1.0, cap=100.0, factor=3.0).delay(n) for n in (1, 2, 3, 4, 5)] == [1, 3, 9, 27, 81]
    assert Backoff(first=7200.0, cap=3600.0).delay(1) == 3600.0, "a first wait above the cap waits the cap"


def test_thousands_of_tries_wait_the_cap_without_overflowing() -> None:
    assert Backoff(first=5.0, cap=300.0).delay(5000) == 300.0


@pytest.mark.parametrize("args", [(0.0, 1.0), (1.0, 0.0), (-1.0, 5.0), (1.0, 5.0, 0.5)])
def test_a_backoff_that_would_not_wait_or_would_shrink_is_refused(args: tuple) -> None:
    with pytest.raises(ValueError, match="first > 0, cap > 0 and factor >= 1"):
        Backoff(*args)


def test_the_loops_wait_by_it_with_their_own_figures() -> None:
    from ffwatchd.config.notify import NotifySettings
    from ffwatchd.daemon.supervisor import SPAWN_BACKOFF
    from ffwatchd.watch.unfiled import RETRY

    n = NotifySettings(backoff=30.0, backoff_max=3600.0)
    assert [n.retry_delay(a) for a in (1, 2, 3, 8, 9)] == [30.0, 60.0, 120.0, 3600.0, 3600.0]
    assert [SPAWN_BACKOFF.delay(r) for r in (1, 2, 6, 7, 50)] == [0.5, 1.0, 16.0, 16.0, 16.0]
    assert [RETRY.delay(t) for t in (1, 2, 7, 30)] == [5.0, 10.0, 300.0, 300.0]
