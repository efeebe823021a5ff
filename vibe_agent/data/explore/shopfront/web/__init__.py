"""The web side: parsing requests and answering them. The shop logic is in shop/."""
