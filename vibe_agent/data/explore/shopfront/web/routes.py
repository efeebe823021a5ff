"""The routes of the shop's small JSON API, served by the standard library."""

from __future__ import annotations

import json
from datetime import date
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from shop.cart import Cart
from shop.catalog import Catalog
from shop.coupons import CouponBook
from shop.inventory import Inventory
from shop.orders import OrderLog


class Routes:
    def __init__(self, catalog: Catalog, inventory: Inventory, coupons: CouponBook,
                 orders: OrderLog) -> None:
        self.catalog, self.inventory = catalog, inventory
        self.coupons, self.orders = coupons, orders
        self.carts: dict[str, Cart] = {}

    def cart(self, session: str) -> Cart:
        return self.carts.setdefault(session, Cart(self.catalog))

    def get_items(self, query: str) -> list[dict]:
        return [{"sku": i.sku, "name": i.name, "price_cents": i.price_cents}
                for i in self.catalog.search(query)]

    def post_coupon(self, session: str, code: str) -> dict:
        """Remember the code on the cart; it is priced (and may be refused) at checkout."""
        self.cart(session).use_coupon(code)
        return {"ok": True, "today": date.today().isoformat()}

    def serve(self, host: str, port: int) -> None:
        routes = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = json.dumps(routes.get_items(self.path.partition("?q=")[2]))
                self.send_response(200)
                self.end_headers()
                self.wfile.write(body.encode("utf-8"))

        ThreadingHTTPServer((host, port), Handler).serve_forever()
