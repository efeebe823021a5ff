import pytest

from units import celsius_to_fahrenheit, fahrenheit_to_celsius, kmh_to_ms


@pytest.mark.parametrize(
    ("celsius", "fahrenheit"),
    [(100, 212), (0, 32), (-40, -40), (37, 98.6), (-17.5, 0.5)],
)
def test_celsius_to_fahrenheit(celsius, fahrenheit):
    assert celsius_to_fahrenheit(celsius) == pytest.approx(fahrenheit)


@pytest.mark.parametrize("celsius", [-30, -1.5, 0, 12.25, 36.6, 45])
def test_round_trip(celsius):
    assert fahrenheit_to_celsius(celsius_to_fahrenheit(celsius)) == pytest.approx(celsius)


def test_wind():
    assert kmh_to_ms(36) == pytest.approx(10)
