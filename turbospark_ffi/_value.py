"""Immutable value objects without importing `dataclasses` or `enum`.

Why not dataclasses: the package runs inside an interpreter that a C host
starts on its first call, and that start-up is a benchmark row. `dataclasses`
pulls in `inspect`, `ast` and `re` (about 20 ms here, cold); `enum` another
5 ms. These values need four things -- fixed fields, no mutation, equality and
hashing on the fields, a readable repr -- and this base gives exactly those.
"""

from __future__ import annotations

__all__ = ["Value"]


class Value:
    """Base of the package's frozen values: subclasses list their fields in
    `__slots__` and assign them once, through `_init`."""

    __slots__ = ()

    def _init(self, **fields: object) -> None:
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable (tried to set {name!r})")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable (tried to delete {name!r})")

    def _fields(self) -> tuple:
        return tuple(getattr(self, name) for name in _field_names(type(self)))

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash((type(self).__name__,) + self._fields())

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}"
                          for name in _field_names(type(self)))
        return f"{type(self).__name__}({inner})"

    def __reduce__(self):
        names = _field_names(type(self))
        return (_rebuild, (type(self), dict(zip(names, self._fields()))))


# Per class, its fields: every `__slots__` entry over the class hierarchy,
# base classes first. A subclass that declares `__slots__ = ()` (the draft
# policies) holds its base's fields; reading only `type(self).__slots__`
# would see none, and every value of that class would compare equal.
_FIELD_NAMES: dict = {}


def _field_names(cls: type) -> tuple:
    try:
        return _FIELD_NAMES[cls]
    except KeyError:
        pass
    names: list = []
    for klass in reversed(cls.__mro__):
        slots = klass.__dict__.get("__slots__", ())
        if isinstance(slots, str):
            slots = (slots,)
        for name in slots:
            if name not in ("__weakref__", "__dict__") and name not in names:
                names.append(name)
    _FIELD_NAMES[cls] = found = tuple(names)
    return found


def _rebuild(cls, fields):
    obj = object.__new__(cls)
    Value._init(obj, **fields)
    return obj
