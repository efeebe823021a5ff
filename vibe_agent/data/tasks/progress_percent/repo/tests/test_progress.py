import pytest

from progress import progress_bar, progress_text


@pytest.mark.parametrize(
    ("done", "total", "text"),
    [
        (3, 12, "已完成 3/12（25.0%）"),
        (1, 3, "已完成 1/3（33.3%）"),
        (0, 7, "已完成 0/7（0.0%）"),
        (999, 1000, "已完成 999/1000（99.9%）"),
        (12, 12, "已完成 12/12（100.0%）"),
        (0, 0, "已完成 0/0（100.0%）"),
    ],
)
def test_progress_text(done, total, text):
    assert progress_text(done, total) == text


def test_progress_bar():
    assert progress_bar(3, 12) == "[#####---------------]"
    assert progress_bar(0, 0, width=4) == "[####]"
