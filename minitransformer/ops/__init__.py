"""The differentiable operations, one file per family (chapters 1–2)."""
from .arithmetic import Add, Div, Mul, Neg, Pow, Sub, add, div, mul, neg, pow, sub
from .broadcasting import unbroadcast
from .conversion import AsType, ToDevice, astype, to_device
from .elementwise import (Exp, Log, Maximum, ReLU, Sigmoid, Sqrt, Tanh, exp, log, maximum, relu, sigmoid, sqrt,
                          tanh)
from .indexing import GetItem, MaskedFill, Where, getitem, masked_fill, where
from .matmul import MatMul, matmul
from .reduction import Max, Mean, Sum, max, mean, sum
from .shape import (BroadcastTo, Concatenate, Reshape, Stack, Transpose, broadcast_to, concatenate,
                    permute, reshape, split, stack, swapaxes, transpose)
