"""EncryptedCodec alone: round trips, rotation, and every way a ciphertext can be wrong."""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from redistate import EncryptedCodec, IntegrityError, JsonCodec
from redistate.core.encryption import key_id

K1, K2 = os.urandom(32), os.urandom(16)
CTX = b"app:user:{u1}"

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_round_trip_equals_the_json_codec(value: Any) -> None:
    codec = EncryptedCodec({"k1": K1}, primary="k1")
    sealed = codec.encode(value, CTX)
    assert sealed.startswith(b"E1:k1:")
    assert codec.decode(sealed, CTX) == JsonCodec().decode(JsonCodec().encode(value, CTX), CTX)


def test_each_encryption_differs_and_hides_the_plaintext() -> None:
    codec = EncryptedCodec({"k1": K1}, primary="k1")
    value = {"secret": "CANARY-4f1e-plaintext"}
    one, two = codec.encode(value, CTX), codec.encode(value, CTX)
    assert one != two  # random nonces
    assert b"CANARY" not in one and b"secret" not in one


def test_rotation_decrypts_with_any_key_and_encrypts_with_the_primary() -> None:
    old = EncryptedCodec({"k1": K1}, primary="k1")
    new = EncryptedCodec({"k1": K1, "k2": K2}, primary="k2")
    sealed = old.encode({"a": 1}, CTX)
    assert new.decode(sealed, CTX) == {"a": 1}
    assert not new.current(sealed) and old.current(sealed)
    resealed = new.encode({"a": 1}, CTX)
    assert key_id(resealed) == "k2" and new.current(resealed)
    with pytest.raises(IntegrityError, match="key 'k2', not one of \\['k1'\\]"):
        old.decode(resealed, CTX)


def test_a_value_copied_to_another_key_does_not_authenticate() -> None:
    codec = EncryptedCodec({"k1": K1}, primary="k1")
    sealed = codec.encode({"a": 1}, CTX)
    with pytest.raises(IntegrityError, match="does not authenticate"):
        codec.decode(sealed, b"app:user:{u2}")


def test_altered_bytes_do_not_authenticate() -> None:
    codec = EncryptedCodec({"k1": K1}, primary="k1")
    sealed = codec.encode({"a": 1}, CTX)
    for at in (len(b"E1:k1:"), len(b"E1:k1:") + 12, len(sealed) - 1):  # nonce, body, tag
        bad = bytearray(sealed)
        bad[at] ^= 1
        with pytest.raises(IntegrityError, match="does not authenticate"):
            codec.decode(bytes(bad), CTX)


def test_a_relabelled_key_id_does_not_authenticate() -> None:
    """Same key bytes under two ids: the id is bound too, so relabelling is caught."""
    codec = EncryptedCodec({"k1": K1, "k9": K1}, primary="k1")
    sealed = codec.encode({"a": 1}, CTX)
    with pytest.raises(IntegrityError, match="does not authenticate with key 'k9'"):
        codec.decode(b"E1:k9:" + sealed[len(b"E1:k1:") :], CTX)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"a":1}', "is not encrypted"),
        (b"E1:k1", "is not encrypted"),
        (b"E1:k1:" + b"\0" * 20, "cut short"),
        (b"E1:zz:" + b"\0" * 40, "key 'zz', not one of"),
    ],
)
def test_bytes_that_are_no_ciphertext_are_an_integrity_error(data: bytes, message: str) -> None:
    with pytest.raises(IntegrityError, match=message):
        EncryptedCodec({"k1": K1}, primary="k1").decode(data, CTX)


@pytest.mark.parametrize(
    ("keys", "primary", "message"),
    [
        ({}, "k1", "at least one key"),
        ({"k 1": K1}, "k 1", "key id 'k 1' must be"),
        ({"x" * 33: K1}, "x" * 33, "must be 1-32 characters"),
        ({"k1": b"short"}, "k1", "key 'k1' must be 16, 24 or 32 bytes, got 5"),
        ({"k1": "not-bytes" * 4}, "k1", "got str"),
        ({"k1": K1}, "k2", "primary 'k2' is not one of the key ids \\['k1'\\]"),
    ],
)
def test_bad_keys_are_refused_naming_the_key(keys: Any, primary: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        EncryptedCodec(keys, primary=primary)


def test_repr_shows_ids_never_key_material() -> None:
    codec = EncryptedCodec({"k1": K1, "k2": K2}, primary="k2")
    shown = repr(codec)
    assert shown == "EncryptedCodec(keys=['k1', 'k2'], primary='k2')"
    assert K1.hex() not in shown and str(K1) not in shown


def test_key_id_reads_the_header_only() -> None:
    assert key_id(b"E1:abc:rest") == "abc"
    assert key_id(b'{"a":1}') is None
    assert key_id(b"E1:" + b"x" * 40) is None
