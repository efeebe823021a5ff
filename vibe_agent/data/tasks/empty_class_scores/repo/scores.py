"""Summaries of a class's exam scores."""


def summarize(scores: list[float]) -> dict:
    """Count, mean, highest and lowest score, and how many passed (60 or more).

    A class without scores yet has count 0 and passed 0; its mean, highest
    and lowest are None.
    """
    return {
        "count": len(scores),
        "mean": round(sum(scores) / len(scores), 1),
        "highest": max(scores),
        "lowest": min(scores),
        "passed": sum(1 for score in scores if score >= 60),
    }
