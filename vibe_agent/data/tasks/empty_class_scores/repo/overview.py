"""The text of the class overview page."""

from scores import summarize


def overview(class_name: str, scores: list[float]) -> str:
    """One line per class, e.g. '三年二班：3 人，平均 80.0 分，最高 95 分，2 人及格'."""
    summary = summarize(scores)
    if summary["count"] == 0:
        return f"{class_name}：暂无成绩"
    return (
        f"{class_name}：{summary['count']} 人，平均 {summary['mean']} 分，"
        f"最高 {summary['highest']} 分，{summary['passed']} 人及格"
    )
