"""The simulated payment provider's settings (``payments.provider``), read from the environment.

The provider confirms a charge by calling this site back, as a real one would: late
(``PAYMENT_PROVIDER_DELAY_MS``, plus up to ``PAYMENT_PROVIDER_JITTER_MS``), twice
(``PAYMENT_PROVIDER_DUPLICATE_RATE``) or not at all (``PAYMENT_PROVIDER_LOSS_RATE``), and it
sends again every confirmation nobody acknowledged after ``PAYMENT_PROVIDER_RESEND_SECONDS``.
The tests and the load tests set them to make each of those happen.
"""

from __future__ import annotations

import os

from .environment import env_int, env_rate

# Where the provider posts its confirmations: this site's own callback, never an address a
# request names (make run, the compose stack and the load tests' server set it). Unset, it
# posts none: a pay with no delay is still confirmed in its own request.
PAYMENT_CALLBACK_URL = os.environ.get("PAYMENT_CALLBACK_URL", "")
# 0: the provider answers the charge at once, and the pay answers paid (its callback still
# comes, as a duplicate); above 0 the pay answers 202 and the callback decides.
PAYMENT_PROVIDER_DELAY_MS = env_int("PAYMENT_PROVIDER_DELAY_MS", 0)
PAYMENT_PROVIDER_JITTER_MS = env_int("PAYMENT_PROVIDER_JITTER_MS", 0)
PAYMENT_PROVIDER_DUPLICATE_RATE = env_rate("PAYMENT_PROVIDER_DUPLICATE_RATE", 0.0)
PAYMENT_PROVIDER_LOSS_RATE = env_rate("PAYMENT_PROVIDER_LOSS_RATE", 0.0)
PAYMENT_PROVIDER_RESEND_SECONDS = env_int("PAYMENT_PROVIDER_RESEND_SECONDS", 30)
# A callback's signature covers the time it was signed: one signed further than this from
# now (either way, for the clocks' drift) is refused, and each accepted one is remembered
# this long, so that none is accepted twice (payments.signature).
PAYMENT_CALLBACK_TOLERANCE_SECONDS = env_int("PAYMENT_CALLBACK_TOLERANCE_SECONDS", 300)
# How long the provider waits for the site to answer a callback before trying again later.
PAYMENT_CALLBACK_TIMEOUT_SECONDS = 10
