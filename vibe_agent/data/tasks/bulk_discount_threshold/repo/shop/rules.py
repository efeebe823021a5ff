"""The shop's pricing rules, in one place (percentages are whole numbers)."""

# Bulk discount: a line of BULK_MIN_QUANTITY or more of the same product
# (10 pens, or more) gets BULK_PERCENT % off that line.
BULK_MIN_QUANTITY = 10
BULK_PERCENT = 10

# Members get MEMBER_PERCENT % off the whole order, after bulk discounts.
MEMBER_PERCENT = 5

# Food is not discounted by bulk (it would go off before it is eaten).
NO_BULK_CATEGORIES = frozenset({"food"})

# Orders below this amount (in cents, after discounts) pay a packing fee.
PACKING_FEE_BELOW = 3000
PACKING_FEE = 200
