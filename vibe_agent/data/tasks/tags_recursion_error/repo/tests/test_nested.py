from nested import flatten
from tags import article_tags


def test_numbers():
    assert flatten([1, [2, (3, 4)], [[5]], 6]) == [1, 2, 3, 4, 5, 6]


def test_strings_are_leaves():
    assert flatten(["python", ["爬虫", ("数据", ["分析"])]]) == ["python", "爬虫", "数据", "分析"]


def test_single_letters_and_bytes():
    assert flatten(["a", [b"raw", ["b", "cd"]]]) == ["a", b"raw", "b", "cd"]


def test_empty_lists():
    assert flatten([]) == []
    assert flatten([[], [[]], ()]) == []


def test_article_tags():
    sections = [["Python", "入门"], [["入门", " 教程 "]], "Python"]
    assert article_tags(sections) == ["Python", "入门", "教程"]
