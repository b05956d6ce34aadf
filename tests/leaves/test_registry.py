import pytest

from kit.errors import KitError, UnknownNameError
from kit.registry import Registry


def test_unknown_name_lists_known():
    r = Registry[int]("widget")
    r.register("a", 1)
    r.register("b", 2)
    with pytest.raises(UnknownNameError, match=r"unknown widget 'c'; known: a, b"):
        r.get("c")


def test_duplicate_registration_rejected():
    r = Registry[int]("widget")
    r.register("a", 1)
    with pytest.raises(KitError):
        r.register("a", 2)
