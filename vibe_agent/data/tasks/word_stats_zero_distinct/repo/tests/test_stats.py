from stats import text_stats
from tokens import words


def test_words():
    assert list(words("Don't stop, DON'T stop now!")) == ["don't", "stop", "don't", "stop", "now"]


def test_stats():
    text = "The cat saw the dog. The dog saw a bird, and the bird flew."
    assert text_stats(text) == {
        "total": 14,
        "distinct": 8,
        "top": [("the", 4), ("saw", 2), ("dog", 2)],
    }


def test_top_two():
    assert text_stats("b a b c b a", top=2) == {
        "total": 6,
        "distinct": 3,
        "top": [("b", 3), ("a", 2)],
    }


def test_empty_text():
    assert text_stats("...") == {"total": 0, "distinct": 0, "top": []}
