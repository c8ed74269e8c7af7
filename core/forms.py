"""Form pieces shared by both products' admins. They refuse, on the field, what the services
would refuse: a service's refusal raised in ``save_model`` comes after the form was found
valid, where the admin can only answer 500."""

from __future__ import annotations

from typing import ClassVar

from django import forms

from .errors import InvalidInput
from .names import name_problem
from .window import moment_utc

WINDOW_ORDER_MESSAGE = "The end must be after the begin."


def name_validate(value: str) -> None:
    """A form field's validator: ``core.names``'s rule, which the API and the services apply."""
    problem = name_problem(value.strip())
    if problem:
        raise forms.ValidationError(f"A name {problem}", code="invalid_name")


class NamedForm(forms.ModelForm):
    """A ModelForm whose ``name_fields`` (a title, a name) follow ``core.names``."""

    name_fields: ClassVar[tuple[str, ...]] = ()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in self.name_fields:
            if name in self.fields:
                self.fields[name].validators.append(name_validate)


class SaleWindowForm(NamedForm):
    """A ModelForm of a ``core.window.SaleWindow`` model that says what is wrong with a
    window that ends before it begins, on the end field. Without it the model's check
    constraint answered with its own name ("Constraint “voucher_window_ordered” is
    violated."), which tells a member of staff nothing. A time outside what the database
    stores (0001-01-01) is refused on its own field, as the API refuses it."""

    def _moment(self, field: str):
        moment = self.cleaned_data.get(field)
        if moment is not None:
            try:
                moment_utc(moment)
            except InvalidInput as exc:
                raise forms.ValidationError(exc.message[:1].upper() + exc.message[1:], code="out_of_range") from None
        return moment

    def clean_begin_at(self):
        return self._moment("begin_at")

    def clean_end_at(self):
        return self._moment("end_at")

    def clean(self):
        cleaned = super().clean()
        begin_at, end_at = cleaned.get("begin_at"), cleaned.get("end_at")
        if begin_at and end_at and end_at <= begin_at:
            # An error on end_at also keeps the model's constraint from being checked again.
            self.add_error("end_at", WINDOW_ORDER_MESSAGE)
        return cleaned
