"""Checks at the door of the functional forms: a wrong input is refused with its name, not deep inside NumPy."""
from __future__ import annotations

from .. import backend


def require_floating_point(function: str, x) -> None:
    """Refuse an integer or boolean array where only real numbers make sense (exp, log, division by σ)."""
    if x.dtype.kind != "f":
        raise TypeError(f"{function}: input must be floating point, got dtype {x.dtype}; "
                        "convert it with .astype('float32')")


def require_boolean_mask(function: str, mask, like, meaning: str) -> None:
    """Refuse a mask that is not a boolean array on the device of ``like``; ``meaning`` says what True means."""
    if not backend.is_array(mask) or mask.dtype != bool:
        kind = getattr(mask, "dtype", type(mask).__name__)
        raise TypeError(f"{function}: mask must be a boolean array ({meaning}), got {kind}; "
                        "compare the ids: ids != pad_id")
    if backend.get_device(mask) != backend.get_device(like):
        raise RuntimeError(f"{function}: mask lives on {backend.get_device(mask)} but the inputs on "
                           f"{backend.get_device(like)}; move it with backend.to_device")
