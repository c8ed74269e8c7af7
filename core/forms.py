"""Form pieces shared by both products' admins."""

from __future__ import annotations

from django import forms

WINDOW_ORDER_MESSAGE = "The end must be after the begin."


class SaleWindowForm(forms.ModelForm):
    """A ModelForm of a ``core.window.SaleWindow`` model that says what is wrong with a
    window that ends before it begins, on the end field. Without it the model's check
    constraint answered with its own name ("Constraint “voucher_window_ordered” is
    violated."), which tells a member of staff nothing."""

    def clean(self):
        cleaned = super().clean()
        begin_at, end_at = cleaned.get("begin_at"), cleaned.get("end_at")
        if begin_at and end_at and end_at <= begin_at:
            # An error on end_at also keeps the model's constraint from being checked again.
            self.add_error("end_at", WINDOW_ORDER_MESSAGE)
        return cleaned
