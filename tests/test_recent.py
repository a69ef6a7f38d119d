"""``recent.kept``: the one rule of the values kept for the next configs (features, kernel specs, deltas)."""

from lipschitz_icl.recent import kept


def test_the_most_recently_used_are_kept_and_the_oldest_go():
    cache: dict = {}
    made: list[str] = []

    def make(k: str):
        return lambda: made.append(k) or k.upper()

    for k in "abbac":
        assert kept(cache, k, make(k), 2) == k.upper()
    assert made == ["a", "b", "c"]  # b and a were found; c came and the oldest in use, b, went
    assert list(cache) == ["a", "c"]  # in use order, oldest first
    assert kept(cache, "b", make("b"), 2) == "B" and made[-1] == "b" and list(cache) == ["c", "b"]


def test_a_value_that_should_not_be_kept_is_made_and_returned_only():
    cache: dict = {}
    assert kept(cache, "x", lambda: [1] * 10, 4, keep=lambda v: len(v) < 5) == [1] * 10
    assert cache == {}
