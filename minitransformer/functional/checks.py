"""Checks at the door of the functional forms: a wrong input is refused with its name, not deep inside NumPy."""
from __future__ import annotations


def require_floating_point(function: str, x) -> None:
    """Refuse an integer or boolean array where only real numbers make sense (exp, log, division by σ)."""
    if x.dtype.kind != "f":
        raise TypeError(f"{function}: input must be floating point, got dtype {x.dtype}; "
                        "convert it with .astype('float32')")
