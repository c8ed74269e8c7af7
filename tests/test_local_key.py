"""The checkout's own secret key (``core.local_key``) when a start that made its file died
before writing it."""

from __future__ import annotations

import pytest

from core import local_key
from core.local_key import LocalKeyEmpty, local_key_ensure


def test_an_empty_key_file_left_by_a_start_that_died_is_named_with_what_to_do(tmp_path, monkeypatch):
    """A start killed between making ``var/secret_key`` and writing it left the file empty:
    every later start waited 5 s and died of a bare FileExistsError."""
    monkeypatch.setattr(local_key, "WAIT_SECONDS", 0.05)
    (tmp_path / "secret_key").touch(mode=0o600)
    with pytest.raises(LocalKeyEmpty) as refused:
        local_key_ensure(tmp_path)
    assert str(tmp_path / "secret_key") in str(refused.value) and "Delete it" in str(refused.value)
    (tmp_path / "secret_key").unlink()  # as it says
    assert len(local_key_ensure(tmp_path)) >= 50
