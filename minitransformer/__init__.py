"""minitransformer: the Transformer of "Attention Is All You Need", from scratch.

    import minitransformer as mt
    x = mt.Tensor([[1.0, 2.0]], requires_grad=True)
    (x * x).sum().backward()
    x.grad                      # array([[2., 4.]])

The engine (``Tensor``, ``Function``, ``backward``) is in ``tensor.py``,
the operations in ``ops/``, the gradient check in ``gradcheck.py``.
"""
from . import backend
from .backend import cuda_available, default_device, set_default_device
from .gradcheck import GradcheckError, gradcheck, numerical_gradient
from .ops import (broadcast_to, concatenate, exp, log, masked_fill, matmul, maximum, relu, reshape, sigmoid,
                  split, sqrt, stack, swapaxes, tanh, transpose, where)
from .tensor import Function, Tensor, enable_grad, is_grad_enabled, no_grad
from . import functional, nn, optim  # noqa: E402  (layers and training build on the engine above)

__version__ = "0.1.0"

__all__ = [
    "Tensor", "Function", "no_grad", "enable_grad", "is_grad_enabled", "gradcheck", "GradcheckError",
    "numerical_gradient", "concatenate", "stack", "split", "where", "masked_fill", "maximum", "exp", "log",
    "sqrt", "tanh", "sigmoid", "relu", "matmul", "reshape", "transpose", "swapaxes", "broadcast_to", "backend",
    "cuda_available", "default_device", "set_default_device", "functional", "nn", "optim",
]
