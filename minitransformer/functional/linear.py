"""The affine map y = x W + b, as ONE matrix product (chapter 5).

Every projection in the Transformer — W^Q, W^K, W^V, W^O (§3.2.2), the two
FFN matrices (§3.3) and the pre-softmax projection (§3.4) — is this map
(``nn.Linear`` holds W and b). Input x (..., in) is folded to a 2-D matrix
(N, in) with N = product of the leading axes, so forward and backward are
each one GEMM, the fastest thing an array library does, instead of a batch
of small products:

    Y = X W + b          (N, out) = (N, in)(in, out) + (out,)
    gX = gY Wᵀ           gW = Xᵀ gY            gb = Σ_rows gY

The FFN's first layer is followed by a ReLU (§3.3, eq. 2). ``linear_relu`` does
both in one Function: the ReLU runs in place on the GEMM's output, and backward
first zeroes the gradient where the output was zeroed (gY ← gY ⊙ [Y > 0]), so
the (N, d_ff) hidden layer is written once and no separate ReLU node is kept.
"""
from __future__ import annotations

from ..backend import xp_of
from ..tensor import Function, Tensor
from .checks import check_linear_operands


class LinearFunction(Function):
    """x (..., in), weight (in, out), optional bias (out,) -> (..., out), one 2-D GEMM each way.

    With ``relu=True`` the output is max(0, x W + b).
    """

    def __init__(self, relu: bool = False) -> None:
        self.relu = relu

    def forward(self, x, weight, bias=None):
        if x.shape[-1] != weight.shape[0]:
            raise ValueError(f"Linear: input has {x.shape[-1]} features (shape {x.shape}) but the weight "
                             f"{weight.shape} expects {weight.shape[0]}")
        x2d = x.reshape(-1, weight.shape[0])             # (N, in)
        y = x2d @ weight                                 # (N, out)
        if bias is not None:
            y += bias
        if self.relu:
            xp_of(y).maximum(y, 0, out=y)                # max(0, x W + b), in place
            self.save_for_backward(x2d, weight, y)       # the output's zeros say where the gradient stops
        else:
            self.save_for_backward(x2d, weight)          # all that backward needs, with x's shape
        self.x_shape = x.shape
        return y.reshape(*x.shape[:-1], weight.shape[1])  # (..., out)

    def backward(self, gy):
        x2d, weight, *relu_output = self.saved_arrays
        gy2d = gy.reshape(-1, weight.shape[1])           # (N, out)
        if self.relu:
            gy2d = gy2d * (relu_output[0] > 0)           # through the ReLU: 1 where x W + b > 0, else 0
        needs = [t.requires_grad for t in self.inputs]
        gx = (gy2d @ weight.T).reshape(self.x_shape) if needs[0] else None   # gY Wᵀ
        gw = x2d.T @ gy2d if needs[1] else None                              # Xᵀ gY
        if len(needs) == 2:
            return gx, gw
        gb = xp_of(gy2d).ones(len(gy2d), gy2d.dtype) @ gy2d if needs[2] else None   # Σ_rows gY, as 1ᵀ gY
        return gx, gw, gb


def linear(x, weight, bias=None) -> Tensor:
    """y = x @ weight + bias for x of any leading shape."""
    check_linear_operands("linear", x, weight, bias)
    return LinearFunction()(x, weight) if bias is None else LinearFunction()(x, weight, bias)


def linear_relu(x, weight, bias=None) -> Tensor:
    """max(0, x @ weight + bias) in one Function: the FFN's first layer (§3.3)."""
    check_linear_operands("linear_relu", x, weight, bias)
    function = LinearFunction(relu=True)
    return function(x, weight) if bias is None else function(x, weight, bias)
