"""Unit conversions used by the weather card."""


def celsius_to_fahrenheit(celsius: float) -> float:
    """Degrees Celsius to degrees Fahrenheit."""
    return celsius * 9 / 5 - 32


def fahrenheit_to_celsius(fahrenheit: float) -> float:
    """Degrees Fahrenheit to degrees Celsius."""
    return (fahrenheit - 32) * 5 / 9


def kmh_to_ms(kmh: float) -> float:
    """Kilometres per hour to metres per second."""
    return kmh / 3.6
