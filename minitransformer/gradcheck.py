"""Gradient checking by central differences (chapter 1).

For a function y = f(x) and a *random* upstream gradient G, the scalar
L(x) = Σ G ⊙ f(x) has  dL/dx = the vector–Jacobian product that backward()
computes. Numerically, one coordinate at a time,

    dL/dx_i ≈ (L(x + ε e_i) − L(x − ε e_i)) / 2ε      (error O(ε²))

Why a random G and not G = 1: the outputs of softmax always sum to 1, so
with G = 1 the true gradient is exactly zero, and a softmax whose backward
returns zeros would pass. A random G sees every direction of the Jacobian.

Why float64: with ε = 1e-6 the difference L(x+ε) − L(x−ε) is ~1e-6 · L;
float32 keeps ~7 significant digits, so the quotient would be mostly noise.
"""
from __future__ import annotations

from typing import Callable, Sequence

from . import backend
from .tensor import Tensor, no_grad


class GradcheckError(AssertionError):
    """The gradient check failed: one of the two kinds below (catch this for either)."""


class GradientMismatch(GradcheckError):
    """backward() ran, and its gradient disagrees with the numerical one: a wrong derivative."""


class BackwardFailed(GradcheckError):
    """backward() raised: the check could not compare any gradient (a crash, not a wrong value)."""


def numerical_gradient(fn: Callable[..., Tensor], inputs: Sequence[Tensor], which: int, upstream, eps: float):
    """d(Σ upstream ⊙ fn(*inputs)) / d(inputs[which]) by central differences."""
    x = inputs[which].data
    xp = backend.xp_of(x)
    if not x.flags.c_contiguous:  # reshape(-1) below must be a view, or perturbing it would change nothing
        x = inputs[which].data = xp.ascontiguousarray(x)
    grad = xp.zeros_like(x)
    flat_x, flat_grad = x.reshape(-1), grad.reshape(-1)  # views: writing flat_x[i] perturbs x
    with no_grad():
        for i in range(flat_x.size):
            original = flat_x[i].item()
            # set flat_grad[i] (a view of grad) to the central difference of Σ upstream ⊙ fn(*inputs) at
            # x_i ± eps, and leave flat_x[i] (a view of the input) as it was
            # Exercise 1.1 — the numerical gradient (chapters/01-autograd.md; graded by pytest -m ex_1_1)
            ### BEGIN SOLUTION
            flat_x[i] = original + eps
            plus = float((fn(*inputs).data * upstream).sum())
            flat_x[i] = original - eps
            minus = float((fn(*inputs).data * upstream).sum())
            flat_x[i] = original
            flat_grad[i] = (plus - minus) / (2 * eps)
            ### END SOLUTION
    return grad


def gradcheck(fn: Callable[..., Tensor], inputs: Sequence[Tensor], eps: float = 1e-6,
              atol: float = 1e-5, rtol: float = 1e-3, seed: int = 0) -> bool:
    """Check ``backward`` of ``fn`` at ``inputs`` against central differences.

    ``inputs`` are float64 Tensors; those with ``requires_grad=True`` are
    checked. An element passes when |analytic − numeric| ≤ atol + rtol·|numeric|.
    Returns True, or raises GradcheckError: a GradientMismatch naming the
    input, the worst index and both values, or a BackwardFailed when backward
    raised (a crash proves nothing about the derivative, so tests that want a
    wrong value caught can tell the two apart).
    """
    if isinstance(inputs, Tensor):   # list(x) would split x into its rows, each a separate argument
        raise TypeError("gradcheck: inputs must be a list of Tensors, one per argument of fn, got one Tensor; "
                        "call gradcheck(fn, [x])")
    if not eps > 0:
        raise ValueError(f"gradcheck: eps must be a small positive step such as 1e-6, got {eps}")
    inputs = list(inputs)
    checked = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    if not checked:
        raise ValueError("gradcheck: no input has requires_grad=True, so nothing would be checked")
    for i in checked:
        if inputs[i].dtype.name != "float64":
            raise TypeError(f"gradcheck: input {i} has dtype {inputs[i].dtype}; use float64. Central "
                            "differences in float32 lose about half their digits to rounding, so the "
                            "check would compare against noise. Cast with tensor.to(numpy.float64) "
                            "or model.to(numpy.float64).")

    for i in checked:
        inputs[i].grad = None
    output = fn(*inputs)
    if not isinstance(output, Tensor) or not output.requires_grad:
        raise ValueError("gradcheck: fn must return a Tensor that depends on an input with requires_grad=True")
    xp = backend.xp_of(output.data)
    # a stream of its own, not default_rng(seed): tests draw their inputs from default_rng(0), and an upstream
    # equal to the input would make a linear map's gW = Xᵀ G = Xᵀ X symmetric, so a transposed gW would pass
    upstream = xp.asarray(backend.xp_for("cpu").random.default_rng([seed, 1]).standard_normal(output.shape))
    upstream = backend.to_device(upstream, output.device).astype(output.dtype)
    try:
        output.backward(upstream)
    except Exception as error:  # a backward that crashes fails the check, with the reason (and the error as cause)
        raise BackwardFailed(f"backward() failed: {type(error).__name__}: {error}") from error

    for i in checked:
        tensor = inputs[i]
        analytic = tensor.grad if tensor.grad is not None else xp.zeros_like(tensor.data)
        numeric = numerical_gradient(fn, inputs, i, upstream, eps)
        excess = abs(analytic - numeric) - (atol + rtol * abs(numeric))
        if (excess > 0).any():
            worst = int(excess.argmax())
            index = tuple(int(j) for j in xp.unravel_index(worst, numeric.shape)) if numeric.ndim else ()
            a, n = float(analytic.reshape(-1)[worst]), float(numeric.reshape(-1)[worst])
            bad = int((excess > 0).sum())
            name = f" ({tensor.name})" if tensor.name else ""
            error = GradientMismatch(
                f"gradient of input {i}{name} with shape {tensor.shape} is wrong at {bad} of {numeric.size} "
                f"positions; worst at index {index}: analytic {a:.6g}, numeric {n:.6g} "
                f"(|difference| {abs(a - n):.3g} > atol {atol:g} + rtol {rtol:g} × |numeric|)")
            # both gradients travel with the error, so a grader can tell a constant factor from a wrong formula
            error.analytic, error.numeric = backend.asnumpy(analytic), backend.asnumpy(numeric)
            raise error
    return True
