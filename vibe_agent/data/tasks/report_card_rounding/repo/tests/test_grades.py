import pytest

from grades import level, report_line, term_score


@pytest.mark.parametrize(
    ("scores", "expected"),
    [
        ([88, 89], 89),
        ([89, 90], 90),
        ([59, 60], 60),
        ([58, 59], 59),
        ([0, 1], 1),
        ([70, 71, 71, 71], 71),
        ([70, 70, 70, 71], 70),
        ([80, 81, 81], 81),
        ([100], 100),
    ],
)
def test_term_score(scores, expected):
    assert term_score(scores) == expected


def test_every_pair_of_scores():
    for first in range(0, 101):
        for second in range(first, 101):
            assert term_score([first, second]) == (first + second + 1) // 2


def test_report_line():
    assert report_line("张三", [88, 89]) == "张三：89 分，良好"
    assert report_line("李四", [74, 75]) == "李四：75 分，良好"


def test_levels():
    assert [level(s) for s in (100, 90, 89, 75, 74, 60, 59, 0)] == [
        "优秀", "优秀", "良好", "良好", "及格", "及格", "不及格", "不及格"
    ]
