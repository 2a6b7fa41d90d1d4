"""The status line of a training run, drawn by tqdm (a terminal line, or a widget in a notebook).

    52%|█████▏    | 728/1400 [00:52<00:48], ep 3 loss 1.234 12.2k tok/s lr 3.1e-03

Steps done / steps planned, elapsed < remaining (the ETA), then the epoch, the mean
loss of the last 50 steps, target tokens per second and the learning rate: at most
79 columns, so that it never wraps in an 80-column terminal.
"""
from __future__ import annotations

import shutil
import sys
from typing import TextIO

from tqdm.auto import tqdm
from tqdm.notebook import tqdm as notebook_tqdm

MAX_COLUMNS = 79
BAR_FORMAT = "{percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}]{postfix}"


class ProgressBar:
    """One status line for the steps of a run (print other lines with ``tqdm.write``, which keeps it)."""

    def __init__(self, total: int | None, initial: int = 0, enabled: bool = True,
                 stream: TextIO | None = None) -> None:
        stream = stream or sys.stderr
        terminal = hasattr(stream, "isatty") and stream.isatty()
        width = {}
        if not issubclass(tqdm, notebook_tqdm):       # in a notebook the bar is a widget as wide as the cell
            width["ncols"] = min(MAX_COLUMNS, shutil.get_terminal_size((MAX_COLUMNS + 1, 24)).columns - 1)
        self.bar = tqdm(total=total, initial=initial, file=stream, disable=not enabled, bar_format=BAR_FORMAT,
                        unit="step", leave=True, mininterval=0.2 if terminal else 10.0,  # a log: a line per 10 s
                        **width)

    def update(self, step: int, total: int | None, epoch: int, loss: float, tokens_per_second: float,
               lr: float) -> None:
        """Show the state after ``step`` optimizer updates (``total``: the planned number, if known)."""
        if total is not None:
            self.bar.total = max(total, step)
        self.bar.set_postfix_str(f"ep {epoch} loss {loss:.3f} {_si(tokens_per_second)} tok/s lr {lr:.1e}",
                                 refresh=False)
        self.bar.update(step - self.bar.n)

    def close(self) -> None:
        self.bar.close()

    def __enter__(self) -> "ProgressBar":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()          # also on Ctrl-C: closed before anything is said about it, never drawn again after


def _si(value: float) -> str:
    """12345 -> '12.3k': short enough for the status line."""
    for limit, suffix in ((1e6, "M"), (1e3, "k")):
        if value >= limit:
            return f"{value / limit:.1f}{suffix}"
    return f"{value:.0f}"
