"""Settings of the shop, read from environment variables with safe defaults."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 8000
    catalog_path: Path = Path("data/catalog.csv")
    coupons_path: Path = Path("data/coupons.csv")
    orders_path: Path = Path("data/orders.jsonl")
    initial_stock: int = 20
    currency: str = "CNY"


def load_settings(env: dict[str, str] | None = None) -> Settings:
    """Settings from SHOP_* variables; anything unset keeps its default."""
    env = dict(os.environ) if env is None else env
    defaults = Settings()
    return Settings(
        host=env.get("SHOP_HOST", defaults.host),
        port=int(env.get("SHOP_PORT", defaults.port)),
        catalog_path=Path(env.get("SHOP_CATALOG", defaults.catalog_path)),
        coupons_path=Path(env.get("SHOP_COUPONS", defaults.coupons_path)),
        orders_path=Path(env.get("SHOP_ORDERS", defaults.orders_path)),
        initial_stock=int(env.get("SHOP_STOCK", defaults.initial_stock)),
    )
