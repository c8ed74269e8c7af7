"""Revocations of bearer tokens: a changed password or a deactivation revokes every token
of the user, and every token deleted, whichever way, is recorded as revoked.

A deleted token is recorded in the deleting transaction (``tokens_revocations_record``), so a
token is never gone from the database while still trusted by the processes that check it
without the database (``accounts.tokens``): a queryset's delete, the admin's, the cascade
from a deleted user all send ``post_delete`` for each token. Its user's row is locked before
(``pre_delete``), as issuing a token locks it first: a delete and a login of one user wait
for each other rather than deadlock. A delete of many users' tokens locks them all first,
in key order (``tokens_revoke``, the tokens' admin).

A changed password:

Django sends no signal of its own for a password change, and its hooks for one
(``password_validation.password_changed``, the admin's and the views' forms) each see only
some of the ways a password changes. Every way ends in saving the user with a new hash
in ``password``: ``set_password`` and ``save``, the admin's password form, the password
change views, ``set_unusable_password``, ``changepassword``. So the hash about to be saved
is compared with the stored one, and a save that wrote a different one revokes. A save
that names its fields and leaves ``password`` out (``update_last_login`` on every login)
costs nothing. A ``QuerySet.update`` of passwords sends no signal and is not seen here.

Django's own upgrade of a hash to the site's first hasher at login rewrites the hash of the
same password: the login backend writes it as an update (``accounts.backends.hash_upgraded``),
which revokes nothing.
"""

from __future__ import annotations

from django.conf import settings
from django.db.models.signals import post_delete, post_save, pre_delete, pre_save
from django.dispatch import receiver

from .models import ApiToken
from .services import tokens_owners_locked, tokens_revocations_record, user_tokens_revoke


@receiver(pre_save, sender=settings.AUTH_USER_MODEL, dispatch_uid="accounts.revoking_change_seen")
def revoking_change_seen(sender, instance, raw=False, update_fields=None, **kwargs):
    instance._password_replaced = instance._deactivated = False
    if raw or instance._state.adding or instance.pk is None:
        return
    if update_fields is not None and not {"password", "is_active"} & set(update_fields):
        return
    stored = sender._default_manager.filter(pk=instance.pk).values_list("password", "is_active").first()
    if stored is not None:
        instance._password_replaced = stored[0] != instance.password
        instance._deactivated = stored[1] and not instance.is_active


@receiver(post_save, sender=settings.AUTH_USER_MODEL, dispatch_uid="accounts.revoking_change_revokes_tokens")
def revoking_change_revokes_tokens(sender, instance, created=False, raw=False, **kwargs):
    if getattr(instance, "_password_replaced", False) or getattr(instance, "_deactivated", False):
        instance._password_replaced = instance._deactivated = False
        user_tokens_revoke(user_id=instance.pk)


@receiver(pre_delete, sender=ApiToken, dispatch_uid="accounts.deleted_tokens_owner_locked")
def deleted_tokens_owner_locked(sender, instance, **kwargs):
    tokens_owners_locked(user_ids=[instance.user_id])


@receiver(post_delete, sender=ApiToken, dispatch_uid="accounts.deleted_token_is_revoked")
def deleted_token_is_revoked(sender, instance, **kwargs):
    tokens_revocations_record(tokens=[instance])
