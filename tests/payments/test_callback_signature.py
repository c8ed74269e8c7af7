"""The callback's signature is checked over the raw body before its fields are read, covers
the time it was signed (a stale one is refused), and is accepted once (a copy is refused);
the form signed before times were signed is refused. Sent through the test client to the real
endpoint, with the real Redis that remembers accepted signatures; the clock is the signer's
time and the verifier's ``now``."""

from __future__ import annotations

import json
import time

import pytest
from django.test import Client
from django.utils.crypto import salted_hmac

from core.namespace import instance_key
from locking.integration import locks_redis
from orders.models import Order
from payments.errors import BadSignature, SignatureExpired
from payments.models import Payment
from payments.signature import HEADER, SALT, callback_sign, callback_verify

from ..buyers import act_concurrently
from ..http import assert_error
from .conftest import buy, pay

pytestmark = pytest.mark.django_db

URL = "/api/payments/callback"


def post(body: bytes, signature: str | None, content_type: str = "application/json"):
    headers = {} if signature is None else {HEADER: signature}
    return Client().post(URL, data=body, content_type=content_type, headers=headers)


@pytest.fixture
def pending(settings, api_client, held_voucher) -> bytes:
    """The body of the confirmation of a charge that waits for its callback."""
    settings.PAYMENT_PROVIDER_DELAY_MS = 500
    settings.PAYMENT_CALLBACK_URL = ""
    buyer = api_client()
    assert pay(buyer, buy(buyer, held_voucher())).status_code == 202
    return json.dumps({"reference": Payment.objects.get().reference, "status": "confirmed"}).encode()


def still_pending() -> bool:
    return Payment.objects.get().status == "requested" and Order.objects.get().status == "held"


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b'{"reference": "nope", "status": "refunded", "extra": 1}', "application/json"),
        (b"not json at all", "application/json"),
        (b"reference=x", "text/plain"),
    ],
)
def test_an_unsigned_body_is_403_before_its_fields_are_read(body, content_type):
    assert_error(post(body, None, content_type), 403, "bad_signature")
    assert_error(post(body, "t=1,n=x,v1=y", content_type), 403, "bad_signature")


def test_a_signed_body_with_wrong_fields_is_then_422():
    body = b'{"reference": "nope", "status": "confirmed"}'
    assert_error(post(body, callback_sign(body)), 422, "invalid")


def test_the_signature_of_the_body_alone_as_signed_before_times_were_is_refused(pending):
    old_form = salted_hmac(SALT, pending, algorithm="sha256").hexdigest()
    assert_error(post(pending, old_form), 403, "bad_signature")
    assert still_pending()


def test_a_changed_time_or_nonce_breaks_the_signature(pending):
    signed = callback_sign(pending)
    at, nonce, mac = (part.split("=", 1)[1] for part in signed.split(","))
    assert_error(post(pending, f"t={int(at) + 1},n={nonce},v1={mac}"), 403, "bad_signature")
    assert_error(post(pending, f"t={at},n={'0' * 32},v1={mac}"), 403, "bad_signature")
    assert still_pending()


def test_a_callback_older_or_further_ahead_than_the_tolerance_is_refused(pending, settings):
    settings.PAYMENT_CALLBACK_TOLERANCE_SECONDS = 300
    now = time.time()
    assert_error(post(pending, callback_sign(pending, at=now - 310)), 403, "signature_expired")
    assert_error(post(pending, callback_sign(pending, at=now + 310)), 403, "signature_expired")
    assert still_pending()
    answer = post(pending, callback_sign(pending, at=now - 240))  # late, within the tolerance
    assert answer.status_code == 200, answer.content
    assert answer.json()["status"] == "paid"


def test_the_tolerance_is_measured_on_the_verifiers_clock(settings):
    settings.PAYMENT_CALLBACK_TOLERANCE_SECONDS = 60
    body = b"{}"
    signed = callback_sign(body, at=1_000_000)
    with pytest.raises(SignatureExpired):
        callback_verify(body, signed, now=1_000_061)
    callback_verify(body, signed, now=1_000_060)


def test_a_callback_signed_under_a_key_being_rotated_out_is_accepted(settings):
    """As admission tickets and API tokens: verified against ``SECRET_KEY`` and each of
    ``SECRET_KEY_FALLBACKS``, signed under the current key; a key dropped from both is refused."""
    body = b"{}"
    old_key, new_key = "old-" + "k" * 50, "new-" + "k" * 50
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = old_key, []
    signed_before, signed_before_too = callback_sign(body), callback_sign(body)
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = new_key, [old_key]
    callback_verify(body, signed_before)
    signed_now = callback_sign(body)
    settings.SECRET_KEY_FALLBACKS = []
    callback_verify(body, signed_now)  # signed under the current key
    with pytest.raises(BadSignature):
        callback_verify(body, signed_before_too)


def test_a_replayed_callback_is_refused_and_remembered_only_until_it_would_be_stale(pending, settings):
    settings.PAYMENT_CALLBACK_TOLERANCE_SECONDS = 300
    signed = callback_sign(pending, at=time.time() - 100)
    assert post(pending, signed).status_code == 200
    assert_error(post(pending, signed), 403, "signature_replayed")
    remembered = locks_redis().pttl(instance_key(f"callback:seen:{signed.rsplit('=', 1)[1]}"))
    assert 0 < remembered <= 201_000  # until t + 300 s, plus a second: then it is stale anyway


def test_two_posts_of_one_confirmation_in_the_same_second_are_both_accepted(pending):
    """The provider's duplicates: each post signed afresh, with a nonce of its own."""
    now = time.time()
    first, second = (post(pending, callback_sign(pending, at=now)) for _ in range(2))
    assert (first.status_code, second.status_code) == (200, 200)
    assert first.json() == second.json() == {"reference": json.loads(pending)["reference"], "status": "paid"}


@pytest.mark.django_db(transaction=True)
def test_one_signed_callback_posted_by_many_processes_at_once_is_accepted_once(pending):
    signed = callback_sign(pending)

    def replay(_slot) -> tuple[int, str | None]:
        answer = post(pending, signed)
        return answer.status_code, answer.json().get("code")

    # 3 processes x 3 threads, released together.
    outcome = act_concurrently(act=replay, plan=[[0, 1, 2]] * 3, race_ms=0)

    assert not outcome.errors, outcome.errors
    assert sorted(outcome.confirmed) == [(200, None)] + [(403, "signature_replayed")] * 8
    assert Payment.objects.get().status == "paid"
