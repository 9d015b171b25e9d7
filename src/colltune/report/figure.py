"""What every figure needs: matplotlib without a display, and the PNG written atomically."""

from __future__ import annotations

import io
import os
from typing import Any

from colltune.files import write_atomic


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (no display needed, as on a cluster's nodes)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def write_png(fig: Any, path: str | os.PathLike[str]) -> None:
    """Write ``fig`` to the PNG file ``path`` atomically (100 dpi), then close it."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    pyplot().close(fig)
    write_atomic(path, buf.getvalue())
