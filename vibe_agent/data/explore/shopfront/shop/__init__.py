"""The shop's own logic: catalogue, cart, pricing, checkout. No web code in here."""
