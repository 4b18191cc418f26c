"""Figures for run folders, evaluations and studies: headless pyplot and one way to save."""

from __future__ import annotations

from pathlib import Path


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend (no display needed), imported on first use."""
    # Late import: pyplot costs ~0.3 s at start-up and only runs that plot need it; the
    # backend must be chosen before pyplot is imported.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig, path: str | Path, dpi: int = 100) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)
