"""Checks at the door of the functional forms: a wrong input is refused with its name, not deep inside NumPy.

The checks that more than one Function needs live here, so that no module reaches into another's private
names: the operands of a linear map (linear.py, linear_loss.py), the targets and label smoothing of a loss
(loss.py, linear_loss.py), and q, k, v and the mask of attention (attention.py, flash_attention.py,
linear_attention.py).
"""
from __future__ import annotations

from .. import backend
from ..tensor import Tensor


def require_floating_point(function: str, x) -> None:
    """Refuse an integer or boolean array where only real numbers make sense (exp, log, division by σ)."""
    if x.dtype.kind != "f":
        raise TypeError(f"{function}: input must be floating point, got dtype {x.dtype}; "
                        "convert it with .astype('float32')")


def check_linear_operands(name: str, x, weight, bias) -> None:
    """x (..., in), weight (in, out), bias (out,): anything else is named here, not deep in the GEMM or
    (a bias of shape (N, out) that broadcasts on the way in) only when backward sums it to (out,)."""
    x_shape, w_shape = getattr(x, "shape", None), getattr(weight, "shape", None)
    if x_shape is None or w_shape is None:   # a Python list: Function.__call__ makes it a Tensor
        return
    if len(x_shape) == 0 or len(w_shape) != 2:
        raise ValueError(f"{name}: expected x (..., in) and weight (in, out), got shapes {tuple(x_shape)} "
                         f"and {tuple(w_shape)}")
    if bias is not None and tuple(getattr(bias, "shape", w_shape[1:])) != (w_shape[1],):
        raise ValueError(f"{name}: bias has shape {tuple(bias.shape)} but the weight {tuple(weight.shape)} "
                         f"needs a bias of shape ({weight.shape[1]},)")


def prepare_targets(rows: Tensor, targets, ignore_index, num_classes: int, name: str = "cross_entropy",
                     what: str = "logits"):
    """Targets as an integer array of shape rows.shape[:-1] on the rows' device, ids checked against
    ``num_classes``. ``rows`` is the logits (..., V), or the input (..., in) of ``linear_cross_entropy``."""
    if isinstance(targets, Tensor):
        targets = targets.data
    targets = backend.to_device(targets if backend.is_array(targets) else backend.xp_for("cpu").asarray(targets),
                                rows.device)
    if targets.dtype.kind not in "iu":
        raise TypeError(f"{name}: targets must be integer class ids, got dtype {targets.dtype}")
    if targets.shape != rows.shape[:-1]:
        raise ValueError(f"{name}: targets have shape {targets.shape} but {what} {rows.shape} "
                         f"need targets of shape {rows.shape[:-1]} (one class id per row of {what})")
    counted = targets != ignore_index if ignore_index is not None else True
    out_of_range = ((targets < 0) | (targets >= num_classes)) & counted
    if bool(out_of_range.any()):
        bad = targets[out_of_range].reshape(-1)[0].item()
        raise IndexError(f"{name}: target id {bad} is outside the vocabulary [0, {num_classes})"
                         + ("" if ignore_index is None else f" and is not ignore_index={ignore_index}"))
    return targets.reshape(-1)


def check_label_smoothing(name: str, label_smoothing: float) -> None:
    if not 0.0 <= label_smoothing < 1.0:
        raise ValueError(f"{name}: label_smoothing must be in [0, 1), got {label_smoothing}")


def check_attention_operands(q, k, v, mask) -> None:
    """Clear errors for the mistakes that are easy to make with four 4-D arrays."""
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
        raise ValueError(f"attention: q, k, v need at least 2 dimensions (..., length, dim); got shapes "
                         f"{q.shape}, {k.shape}, {v.shape}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"attention: queries and keys must have the same last size d_k; got q {q.shape} "
                         f"and k {k.shape}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"attention: keys and values must have the same length S (axis -2); got k {k.shape} "
                         f"and v {v.shape}")
    if k.shape[-2] == 0:       # the softmax over the keys would be over nothing
        raise ValueError(f"attention: no keys to attend to: k has shape {k.shape} (S = 0 along axis -2) for "
                         f"queries q {q.shape}; attention needs at least one key")
    if q.dtype.kind != "f":
        raise TypeError(f"attention: q, k, v must be floating point, got {q.dtype}")
    if mask is None:
        return
    if not backend.is_array(mask) or mask.dtype != bool:
        kind = getattr(mask, "dtype", type(mask).__name__)
        raise TypeError(f"attention: mask must be a boolean array (True = may attend), got {kind}; "
                        "build one with F.padding_mask / F.causal_mask, or compare: ids != pad_id")
    scores_shape = (*q.shape[:-1], k.shape[-2])
    if backend.get_device(mask) != backend.get_device(q):
        raise RuntimeError(f"attention: mask lives on {backend.get_device(mask)} but q on "
                           f"{backend.get_device(q)}; move it with backend.to_device")
    fits = mask.ndim <= len(scores_shape) and all(
        m in (1, s) for m, s in zip(reversed(mask.shape), reversed(scores_shape)))
    if not fits:
        raise ValueError(f"attention: mask of shape {mask.shape} does not broadcast to the scores' shape "
                         f"{scores_shape} (B, h, T, S); a padding mask is (B, 1, 1, S), a causal one (1, 1, T, T)")


def broadcast_leading(q, k, v) -> tuple[int, ...]:
    """The common leading shape (B, h, ...) of q, k and v, or a clear error."""
    shapes = [a.shape[:-2] for a in (q, k, v)]
    ndim = max(len(s) for s in shapes)
    padded = [(1,) * (ndim - len(s)) + tuple(s) for s in shapes]
    lead = []
    for sizes in zip(*padded):
        size = max(sizes)
        if any(s not in (1, size) for s in sizes):
            raise ValueError(f"attention: the leading axes of q {q.shape}, k {k.shape} and v {v.shape} "
                             "do not broadcast")
        lead.append(size)
    return tuple(lead)


def require_boolean_mask(function: str, mask, like, meaning: str) -> None:
    """Refuse a mask that is not a boolean array on the device of ``like``; ``meaning`` says what True means."""
    if not backend.is_array(mask) or mask.dtype != bool:
        kind = getattr(mask, "dtype", type(mask).__name__)
        raise TypeError(f"{function}: mask must be a boolean array ({meaning}), got {kind}; "
                        "compare the ids: ids != pad_id")
    if backend.get_device(mask) != backend.get_device(like):
        raise RuntimeError(f"{function}: mask lives on {backend.get_device(mask)} but the inputs on "
                           f"{backend.get_device(like)}; move it with backend.to_device")
