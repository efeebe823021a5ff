"""Options of this project's tests: `pytest --region remote` checks one region only."""

import pytest

from shipping import PRICES


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--region", default="all", choices=["all", *PRICES],
                     help="only check the cases of this region")


@pytest.fixture
def region_wanted(request: pytest.FixtureRequest) -> str:
    return request.config.getoption("--region")
