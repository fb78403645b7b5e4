"""Config naming shared by every layer: the unset knob value and the name of the all-default configuration."""

from __future__ import annotations

__all__ = ["DEFAULT", "DEFAULT_CONFIG"]

DEFAULT = ""
"""A knob value that means "not set": the variable is left out of the point's environment."""

DEFAULT_CONFIG = "default"
"""The configuration name of the point with every knob unset (always measured, the baseline)."""
