"""What `tsffi_store_json` answers: the store as the engine's resolution
sees it, one row per alias that counts, with the badges a model picker shows
(the install's two drafters, read from its index as a plan reads them). Its
JSON shape is wire.py's, as every shape of the C ABI.

A host lists the store through this call rather than reading
`installed.json` itself, so the picker offers exactly the aliases a plan
would resolve (store.py: the engine's all-or-nothing decode, the row filter,
a later row winning), and shows why when there are none.
"""

from __future__ import annotations

from ._value import Value

__all__ = ["StoreAlias", "StoreListing", "store_listing", "NO_ROOT_REASON"]


class StoreAlias(Value):
    """One alias that counts: `path` as recorded, `model_dir` the absolute
    directory a plan of it reads, and what that install's index says of the
    two drafters (None: it cannot be read)."""

    __slots__ = ("alias", "path", "model_dir", "has_mtp_head", "has_dflash")

    def __init__(self, alias: str, path: str, model_dir: str, has_mtp_head: bool | None,
                 has_dflash: bool | None) -> None:
        self._init(alias=alias, path=path, model_dir=model_dir, has_mtp_head=has_mtp_head,
                   has_dflash=has_dflash)


class StoreListing(Value):
    """`root` is the store root (None: neither TURBOSPARK_HOME nor HOME is
    set); `store_file` the absolute path of its installed.json; `read` and
    `reason` as store.StoreFile's; `aliases` a tuple of StoreAlias, one per
    alias that counts, in the order the aliases first appear."""

    __slots__ = ("root", "store_file", "read", "reason", "aliases")

    def __init__(self, root, store_file, read: bool, reason, aliases: tuple) -> None:
        self._init(root=root, store_file=store_file, read=read, reason=reason, aliases=aliases)


NO_ROOT_REASON = ("no store: neither TURBOSPARK_HOME nor HOME is set, so a model name is "
                  "only a path")


def store_listing() -> StoreListing:
    """The store now: its root read from the environment as each resolution
    reads it, its installed.json through store.read_store (remembered while
    unchanged), and each counting alias's install through snapshots.snapshot
    (remembered while unchanged, as a plan's)."""
    from .errors import InvalidArgument
    from .jsontext import is_utf8_text
    from .model_names import absolute_path, store_root
    from .store import counting_rows, read_store
    root = store_root()
    if root is None:
        return StoreListing(None, None, False, NO_ROOT_REASON, ())
    store = read_store(root)
    try:
        aliases = tuple(_alias_row(alias, path, absolute_path(path, f"the alias {alias}"))
                        for alias, path in counting_rows(store).items())
        store_file = absolute_path(store.path, "the store's installed.json")
    except InvalidArgument as exc:
        # The store's paths cannot be named as a result names them (absolute,
        # UTF-8: a working directory removed under a relative root, or bytes
        # that are not UTF-8 in it): no rows, and why. The root is shown only
        # when it is UTF-8 text.
        shown = root if is_utf8_text(root) else None
        return StoreListing(shown, None, False, f"no store listing: {exc}", ())
    return StoreListing(root, store_file, store.read, store.reason, aliases)


def _alias_row(alias: str, path: str, model_dir: str) -> StoreAlias:
    from .snapshots import snapshot
    from .resident_index import install_has_dflash, install_has_mtp_head
    index = snapshot(model_dir).index
    if index is None:
        return StoreAlias(alias, path, model_dir, None, None)
    return StoreAlias(alias, path, model_dir, install_has_mtp_head(index),
                      install_has_dflash(index))
