"""Figures for the book: seaborn/matplotlib, labelled axes, one function per figure.

Every function takes the data it draws (arrays, dataclasses or tables computed elsewhere in the
package), returns the matplotlib ``Figure`` and never saves or shows it; chapters add the caption.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import seaborn as sns


def use_style() -> None:
    """The book's plotting style (seaborn whitegrid, readable sizes)."""
    sns.set_theme(style="whitegrid", context="notebook", palette="colorblind")


def new_figure(width: float = 6.4, height: float = 4.0):
    """A figure with one axes, in the book's style."""
    use_style()
    return plt.subplots(figsize=(width, height), layout="constrained")


# --- theory (bounds and corollaries) ---


# --- geometry and decoder cells ---


# --- cramming ---


# --- copying ---
