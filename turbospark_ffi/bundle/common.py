"""What the ELF and the Mach-O sides of a bundle share: the one error a
bundle step raises."""

from __future__ import annotations

__all__ = ["BundleError"]


class BundleError(Exception):
    """Why a bundle could not be written: one line, for the user."""
