"""Immutable value objects without importing `dataclasses` or `enum`.

Why not dataclasses: the package runs inside an interpreter that a C host
starts on its first call, and that start-up is a benchmark row. `dataclasses`
pulls in `inspect`, `ast` and `re` (about 20 ms here, cold); `enum` another
5 ms. These values need four things -- fixed fields, no mutation, equality and
hashing on the fields, a readable repr -- and this base gives exactly those.
"""

from __future__ import annotations

# The C module behind `operator` (a builtin: importing `operator` itself
# would also compile its pure-Python fallbacks on a cold start).
from _operator import attrgetter

__all__ = ["Value"]


class Value:
    """Base of the package's frozen values: subclasses list their fields in
    `__slots__` and assign them once, through `_init`. A subclass that only
    narrows the type (`__slots__ = ()`) has its base's fields."""

    __slots__ = ()
    # Per class: every field over the MRO, and one C getter for all of them
    # (set by __init_subclass__). Equality and hashing read the fields
    # wherever values are compared or keyed (a choices table compares its
    # columns' drafter choices); a generator over `__slots__` cost about a
    # third of a 51-item choices table (profiled).
    _field_names: tuple[str, ...] = ()
    _getter = staticmethod(lambda value: ())

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        names: list[str] = []
        # Every `__slots__` entry over the hierarchy, bases first: a subclass
        # declaring `__slots__ = ()` (the draft policies) holds its base's
        # fields, and reading only its own would make all its values equal.
        for klass in reversed(cls.__mro__):
            slots = klass.__dict__.get("__slots__", ())
            for name in (slots,) if isinstance(slots, str) else slots:
                if name not in ("__weakref__", "__dict__") and name not in names:
                    names.append(name)
        cls._field_names = tuple(names)
        if len(names) > 1:
            cls._getter = attrgetter(*names)
        elif names:
            only = attrgetter(names[0])
            cls._getter = staticmethod(lambda value: (only(value),))
        else:
            cls._getter = staticmethod(lambda value: ())

    def _init(self, **fields: object) -> None:
        setter = object.__setattr__
        for name, value in fields.items():
            setter(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable (tried to set {name!r})")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable (tried to delete {name!r})")

    def _fields(self) -> tuple:
        return self._getter(self)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._getter(self) == other._getter(other)

    def __hash__(self) -> int:
        return hash((type(self).__name__,) + self._getter(self))

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._field_names)
        return f"{type(self).__name__}({inner})"

    def __reduce__(self):
        return (_rebuild, (type(self), dict(zip(self._field_names, self._fields()))))


def _rebuild(cls, fields):
    obj = object.__new__(cls)
    Value._init(obj, **fields)
    return obj
