"""Start the shop: build the services once and hand them to the routes."""

from __future__ import annotations

from config import Settings, load_settings
from shop.catalog import Catalog
from shop.coupons import CouponBook
from shop.inventory import Inventory
from shop.orders import OrderLog
from web.routes import Routes


def build(settings: Settings) -> Routes:
    """Every service of the shop, wired together."""
    catalog = Catalog.from_csv(settings.catalog_path)
    inventory = Inventory({item.sku: settings.initial_stock for item in catalog})
    coupons = CouponBook.from_csv(settings.coupons_path)
    return Routes(catalog, inventory, coupons, OrderLog(settings.orders_path))


def main() -> None:
    settings = load_settings()
    routes = build(settings)
    routes.serve(settings.host, settings.port)


if __name__ == "__main__":
    main()
