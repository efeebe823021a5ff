from weather import weather_card


def test_summer_card():
    reading = {"city": "北京", "temp_c": 25, "wind_kmh": 18}
    assert weather_card(reading) == "北京：25°C / 77°F，风速 5.0 m/s"


def test_winter_card():
    reading = {"city": "哈尔滨", "temp_c": -20, "wind_kmh": 9}
    assert weather_card(reading) == "哈尔滨：-20°C / -4°F，风速 2.5 m/s"
