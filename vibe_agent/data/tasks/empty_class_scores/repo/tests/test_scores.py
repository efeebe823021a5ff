from overview import overview
from scores import summarize


def test_summary():
    assert summarize([95, 58, 87]) == {
        "count": 3,
        "mean": 80.0,
        "highest": 95,
        "lowest": 58,
        "passed": 2,
    }


def test_single_score():
    assert summarize([59.5]) == {
        "count": 1,
        "mean": 59.5,
        "highest": 59.5,
        "lowest": 59.5,
        "passed": 0,
    }


def test_no_scores_yet():
    assert summarize([]) == {
        "count": 0,
        "mean": None,
        "highest": None,
        "lowest": None,
        "passed": 0,
    }


def test_overview_of_a_new_class():
    assert overview("一年一班", []) == "一年一班：暂无成绩"


def test_overview():
    text = overview("三年二班", [95, 58, 87])
    assert text == "三年二班：3 人，平均 80.0 分，最高 95 分，2 人及格"
