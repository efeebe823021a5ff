"""Report-card grades: the mean of a term's scores, rounded the way teachers do it."""


def term_score(scores: list[int]) -> int:
    """The mean of `scores` rounded half up (四舍五入) to a whole point: 88.5 becomes 89."""
    return round(sum(scores) / len(scores))


def level(score: int) -> str:
    """优秀 (90 and up), 良好 (75 and up), 及格 (60 and up), otherwise 不及格."""
    if score >= 90:
        return "优秀"
    if score >= 75:
        return "良好"
    if score >= 60:
        return "及格"
    return "不及格"


def report_line(name: str, scores: list[int]) -> str:
    """E.g. '张三：89 分，良好'."""
    score = term_score(scores)
    return f"{name}：{score} 分，{level(score)}"
