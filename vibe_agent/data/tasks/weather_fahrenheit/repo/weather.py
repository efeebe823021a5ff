"""The one-line weather card shown on the home screen."""

from units import celsius_to_fahrenheit, kmh_to_ms


def weather_card(reading: dict) -> str:
    """Format a reading such as {"city": "北京", "temp_c": 25, "wind_kmh": 18}."""
    celsius = reading["temp_c"]
    fahrenheit = celsius_to_fahrenheit(celsius)
    wind = kmh_to_ms(reading["wind_kmh"])
    return f"{reading['city']}：{celsius:.0f}°C / {fahrenheit:.0f}°F，风速 {wind:.1f} m/s"
