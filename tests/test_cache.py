"""The one bounded cache (ffwatchd/cache.py): least recently used goes first."""

from __future__ import annotations

from ffwatchd.cache import BoundedCache


def test_the_least_recently_used_entry_goes_first() -> None:
    c: BoundedCache[int] = BoundedCache(2)
    c.put("a", 1)
    c.put("b", 2)
    assert c.get("a") == 1                 # a hit: "a" is now the newest
    c.put("c", 3)
    assert (c.get("a"), c.get("b"), c.get("c"), len(c)) == (1, None, 3, 2)


def test_a_value_of_none_is_cached_too() -> None:
    c: BoundedCache[str | None] = BoundedCache(4)
    made = []
    for _ in range(3):
        c.get_or_make("k", lambda: made.append(1))      # appending returns None
    assert made == [1] and c.get("k", "missing") is None
