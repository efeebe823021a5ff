"""Monthly sales reports from the shop's CSV export."""
