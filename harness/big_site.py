"""The big site's sizes and names, shared by ``manage.py seed_big``, which builds it, and the
benchmarks that measure on it (``benchmarks.history``)."""

# A busy shop's history: what a site accumulates and its pages must not pay for.
BIG_SITE_SIZES = {"users": 500_000, "vouchers": 20, "orders": 400_000, "pools": 5, "draws": 200_000}
# The users are site-1, site-2, ...; site-1 is the busiest buyer.
BIG_SITE_USERNAME_PREFIX = "site-"
BIG_SITE_BUSIEST_BUYER = f"{BIG_SITE_USERNAME_PREFIX}1"
