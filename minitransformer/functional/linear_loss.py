"""The pre-softmax projection and the loss as one Function (§3.4, §5.4; chapter 10).

A translator's last two steps make the largest arrays of a training step: the
logits x W (+ b), one row of V scores for each of the N target positions, and,
inside the loss, their exponentials and their gradient, each (N, V) again. Run
as two Functions, ``linear`` then ``cross_entropy``, all three must exist at
once, because the logits belong to the caller: whoever holds that Tensor may read
it after the loss, so the loss cannot write over it.

Fused, the logits belong to this Function alone, so ONE (N, V) array does all
three jobs, in place, and it is gone before forward returns:

    logits = X W (+ b)              the GEMM of LinearFunction, into a fresh array
    logits -> e^(x − m)             CrossEntropy.forward with overwrite=True; the loss
    e^(x − m) -> G = ∂loss/∂logits  CrossEntropy.backward with overwrite=True, for gy = 1
    gX = G Wᵀ,  gW = Xᵀ G,  gb = 1ᵀ G    the GEMMs of LinearFunction.backward

The gradient is taken in forward, while the logits exist, for an upstream
gradient of 1; backward only scales the three results by the real gy (the loss is
linear in gy). With gy = 1, the usual ``loss.backward()``, every number is the one
the two Functions give, bit for bit: the same operations on the same arrays in
the same order (tests/functional/test_linear_loss.py checks it). Nothing (N, V) outlives
forward, so the graph holds only X, W and three small gradients, and a second
walk (``retain_graph=True``) works as usual.

The same idea, with the rows also taken in blocks so that even one (N, V) array
is never whole, lets large-vocabulary models train in far less memory; blocks
would change the order of W's gradient sum over the rows, and so every trained
model, which is why we keep one array.
"""
from __future__ import annotations

from ..backend import xp_of
from ..tensor import Function, Tensor, is_grad_enabled
from .checks import check_label_smoothing, check_linear_operands, prepare_targets, require_floating_point
from .loss import CrossEntropy


class LinearCrossEntropy(Function):
    """x (..., in), weight (in, V), optional bias (V,) -> the mean cross-entropy of x W + b, a scalar.

    ``needs`` says which inputs want a gradient, in order; None (under no_grad) computes the loss alone.
    """

    def __init__(self, targets, label_smoothing: float = 0.0, ignore_index: int | None = None,
                 needs: tuple[bool, ...] | None = (True, True, True)) -> None:
        self.loss = CrossEntropy(targets, label_smoothing, ignore_index, overwrite=True)
        self.needs = needs

    def forward(self, x, weight, bias=None):
        x2d = x.reshape(-1, weight.shape[0])                # (N, in)
        logits = x2d @ weight                               # (N, V): the one (N, V) array
        if bias is not None:
            logits += bias
        loss = self.loss.forward(logits)                    # the logits now hold e^(x − m)
        if self.needs is not None and any(self.needs):
            xp = xp_of(logits)
            g = self.loss.backward(xp.ones((), dtype=loss.dtype))   # (N, V), now G = (p − q)/n, in place
            need_x, need_w, need_b = (*self.needs, False)[:3]
            self.save_for_backward((g @ weight.T).reshape(x.shape) if need_x else None,     # gX = G Wᵀ
                                   x2d.T @ g if need_w else None,                            # gW = Xᵀ G
                                   xp.ones(len(g), g.dtype) @ g if need_b and bias is not None else None)  # 1ᵀ G
        self.loss.saved_arrays = None                       # the (N, V) array goes now
        return loss

    def backward(self, gy):
        if not self.saved_arrays:                           # forward saved no gradients
            raise RuntimeError("LinearCrossEntropy: this loss was computed without its gradient (under no_grad); "
                               "compute it again with gradients enabled")
        scaled = tuple(None if g is None else g * gy for g in self.saved_arrays)   # linear in gy; exact for gy = 1
        return scaled if len(self.inputs) == 3 else scaled[:2]


def linear_cross_entropy(x, weight, targets, bias=None, label_smoothing: float = 0.0,
                         ignore_index: int | None = None) -> Tensor:
    """``cross_entropy(linear(x, weight, bias), targets, ...)``, with no (N, V) array left after forward.

    x: (..., in) Tensor; weight: (in, V); bias: (V,) or None; targets: integer ids of shape x.shape[:-1].
    label_smoothing and ignore_index as in ``cross_entropy``. The value and every gradient are those of the
    two-Function form (bit for bit when backward starts from this loss with gradient 1).
    """
    x, weight = (t if isinstance(t, Tensor) else Tensor(t) for t in (x, weight))
    if bias is not None and not isinstance(bias, Tensor):
        bias = Tensor(bias)
    check_linear_operands("linear_cross_entropy", x, weight, bias)
    if x.shape[-1] != weight.shape[0]:
        raise ValueError(f"linear_cross_entropy: x has {x.shape[-1]} features (shape {x.shape}) but the weight "
                         f"{weight.shape} expects {weight.shape[0]}")
    require_floating_point("linear_cross_entropy", x)
    check_label_smoothing("linear_cross_entropy", label_smoothing)
    flat_targets = prepare_targets(x, targets, ignore_index, num_classes=weight.shape[1],
                                    name="linear_cross_entropy", what="x")
    inputs = (x, weight) if bias is None else (x, weight, bias)
    needs = tuple(t.requires_grad for t in inputs) if is_grad_enabled() else None
    return LinearCrossEntropy(flat_targets, label_smoothing, ignore_index, needs)(*inputs)
