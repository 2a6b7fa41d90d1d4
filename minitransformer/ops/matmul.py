"""Matrix product with batch broadcasting (chapter 2).

For Y = A B with A (…, n, k) and B (…, k, m), the chain rule gives

    dL/dA = dL/dY · Bᵀ        dL/dB = Aᵀ · dL/dY

and batch axes that were broadcast are summed back (``unbroadcast``).
"""
from __future__ import annotations

from ..tensor import Function, Tensor
from .broadcasting import unbroadcast


class MatMul(Function):
    def forward(self, a, b):
        if a.ndim == 0 or b.ndim == 0:
            raise ValueError(f"matmul: inputs must have at least 1 dimension, got shapes {a.shape} and {b.shape}")
        try:
            y = a @ b
        except ValueError:
            raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not multiply "
                             f"(inner sizes {a.shape[-1]} and {b.shape[-2] if b.ndim > 1 else b.shape[0]} "
                             "must agree; batch axes must broadcast)") from None
        self.save_for_backward(a, b)
        return y

    def backward(self, gy):
        a, b = self.saved_arrays
        # vectors are treated as a 1-row / 1-column matrix, as numpy does
        a2 = a.reshape(1, -1) if a.ndim == 1 else a          # (…, n, k)
        b2 = b.reshape(-1, 1) if b.ndim == 1 else b          # (…, k, m)
        if a.ndim == 1:
            gy = gy[..., None, :] if b.ndim > 1 else gy.reshape(1)
        if b.ndim == 1:
            gy = gy[..., None]                                  # (…, n, m)
        ga = gb = None
        # Exercise 2.2 — MatMul backward (chapters/02-tensors-broadcasting.md; graded by pytest -m ex_2_2)
        ### BEGIN SOLUTION
        if self.inputs[0].requires_grad:
            ga = unbroadcast(gy @ b2.swapaxes(-1, -2), a2.shape).reshape(a.shape)   # dL/dA = G Bᵀ
        if self.inputs[1].requires_grad:
            if b2.ndim == 2 and a2.ndim > 2:
                # a shared weight: fold the batch into the rows, one 2-D GEMM instead of a batch and a sum
                k, n_out = b2.shape
                gb = a2.reshape(-1, k).T @ gy.reshape(-1, n_out)                      # dL/dB = Aᵀ G
            else:
                gb = unbroadcast(a2.swapaxes(-1, -2) @ gy, b2.shape)
            gb = gb.reshape(b.shape)
        ### END SOLUTION
        return ga, gb


def matmul(a, b) -> Tensor:
    return MatMul()(a, b)
