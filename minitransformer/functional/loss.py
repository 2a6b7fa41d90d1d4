"""Cross-entropy with label smoothing, one fused Function (chapter 4, §5.4).

For logits x (N, V) and a target distribution q over the V classes per row,

    loss = (1/n) Σ_rows  −Σ_k q_k log softmax(x)_k

averaged over the n rows whose target is not ``ignore_index`` (padding).
Fusing log-softmax with the negative log-likelihood gives the famous short
backward (chapter 4 derives it):

    ∂loss/∂x_k = (softmax(x)_k − q_k) / n      for a counted row, 0 for an ignored one.

The smoothed target distribution (§5.4, ε_ls = 0.1 in the paper)
----------------------------------------------------------------------
Without ``ignore_index``:   q = (1 − ε)·onehot(target) + ε/V   on every class
                            (identical to PyTorch's ``label_smoothing``).
With ``ignore_index = pad``: q = (1 − ε)·onehot(target) + ε/(V − 1) on every class
                            except ``pad``, and q_pad = 0.
The padding id is never a correct output, so we give it no probability mass:
the model is not taught to put ε/V on a token it must never emit. PyTorch
instead spreads ε over all V classes, pad included, so with ignore_index set
our loss differs from ``torch.nn.functional.cross_entropy`` by a small amount
(tests compare against the explicitly built distribution).
"""
from __future__ import annotations

from ..backend import xp_of
from ..tensor import Function, Tensor
from .checks import check_label_smoothing, prepare_targets, require_floating_point


class CrossEntropy(Function):
    """Mean cross-entropy of logits (N, V) against integer targets (N,); returns a scalar."""

    def __init__(self, targets, label_smoothing: float = 0.0, ignore_index: int | None = None,
                 overwrite: bool = False) -> None:
        self.targets = targets
        self.epsilon = float(label_smoothing)
        self.ignore_index = ignore_index
        # overwrite=True: forward turns the logits into e^(x − m) in place and backward turns those into
        # the gradient in place. Only for an owner of the logits that nobody else can see
        # (linear_cross_entropy, functional/linear_loss.py); a graph walk cannot then be repeated.
        self.overwrite = overwrite

    def _smoothing_classes(self, num_classes: int) -> int:
        """How many classes share ε: all V, or V − 1 when the padding id is left out."""
        pad = self.ignore_index
        return num_classes - 1 if pad is not None and 0 <= pad < num_classes else num_classes

    def forward(self, logits):
        xp = xp_of(logits)
        n_rows, num_classes = logits.shape
        targets = self.targets
        rows = xp.arange(n_rows)
        valid = targets != self.ignore_index if self.ignore_index is not None else xp.ones(n_rows, dtype=bool)
        safe_targets = xp.where(valid, targets, 0)          # any in-range id; ignored rows are masked out below

        # log p_k = x_k − log Z with log Z = m + log Σ_j e^(x_j − m), m the row maximum (chapter 4). At most
        # ONE (N, V) array is made (none with overwrite=True): the exponentials e^(x − m), which backward
        # turns into softmax(x); every other quantity is a number per row.
        row_max = logits.max(axis=1, keepdims=True)                               # (N, 1) m
        target_logit = logits[rows, safe_targets]                                 # (N,) x_t, read first
        ones = xp.ones(num_classes, dtype=logits.dtype)
        if self.epsilon > 0:                                                      # label smoothing, below
            logit_sum = logits @ ones                                             # (N,) Σ_k x_k
            spread = self._smoothing_classes(num_classes)
            pad_logit = logits[:, self.ignore_index].copy() if spread < num_classes else None
        exps = xp.subtract(logits, row_max, out=logits if self.overwrite else None)   # (N, V) x − m
        xp.exp(exps, out=exps)                                                    # (N, V) e^(x − m), in place
        row_sum = exps @ ones                                                     # (N,) row sums as a GEMV
        log_z = row_max[:, 0] + xp.log(row_sum)                                   # (N,) log Σ_j e^(x_j)
        row_loss = log_z - target_logit                                           # (N,) −log p_target
        if self.epsilon > 0:
            log_prob_sum = logit_sum - num_classes * log_z                        # (N,) Σ_k log p_k
            if spread < num_classes:
                log_prob_sum -= pad_logit - log_z                                 # leave the pad class out
            # −Σ q log p with q = (1−ε) onehot + ε/K on the K allowed classes
            row_loss = (1 - self.epsilon) * row_loss - (self.epsilon / spread) * log_prob_sum

        self.n_valid = int(valid.sum())
        self.save_for_backward(exps, row_sum, valid, safe_targets)                # (N, V), then (N,) each
        if self.n_valid == 0:   # a batch of padding only: nothing to learn from, loss 0, gradient 0
            return xp.zeros((), dtype=logits.dtype)
        return (xp.where(valid, row_loss, 0).sum() / self.n_valid).astype(logits.dtype)

    @property
    def valid(self):
        """(N,) bool: which rows count (their target is not ``ignore_index``); saved by forward."""
        return self.saved_arrays[2]

    @property
    def safe_targets(self):
        """(N,) the targets, with 0 on the ignored rows (any id in range: they are masked out); saved by forward."""
        return self.saved_arrays[3]

    def backward(self, gy):
        xp = xp_of(gy)
        exps, row_sum = self.saved_arrays[:2]       # and self.valid, self.safe_targets (the properties above)
        if self.n_valid == 0:
            return xp.zeros_like(exps)
        n_rows, num_classes = exps.shape
        grad = xp.multiply(exps, (1 / row_sum)[:, None], out=exps if self.overwrite else None)   # softmax(x)
        rows = xp.arange(n_rows)
        # turn grad = softmax into the gradient in place: minus the smoothed target q (K = spread =
        # self._smoothing_classes(num_classes) classes share ε), times gy / self.n_valid, 0 on ignored rows
        # Exercise 4.3 — label-smoothed cross-entropy backward (chapters/04-softmax-cross-entropy.md; graded by pytest -m ex_4_3)
        ### BEGIN SOLUTION
        grad[rows, self.safe_targets] -= 1 - self.epsilon               # − (1−ε) onehot
        if self.epsilon > 0:
            spread = self._smoothing_classes(num_classes)
            grad -= self.epsilon / spread                               # − ε/K everywhere ...
            if spread < num_classes:
                grad[:, self.ignore_index] += self.epsilon / spread     # ... except on the pad class
        scale = (gy / self.n_valid).astype(grad.dtype)
        grad *= xp.where(self.valid, scale, 0).astype(grad.dtype)[:, None]   # ignored rows get 0
        ### END SOLUTION
        return grad


def cross_entropy(logits, targets, label_smoothing: float = 0.0, ignore_index: int | None = None) -> Tensor:
    """Mean cross-entropy over the non-ignored positions; a scalar Tensor.

    logits: (N, V) or (..., V) Tensor; targets: integer ids (N,) or (...) — an array, list or Tensor.
    label_smoothing: ε of §5.4 (the paper uses 0.1); see the module docstring for the exact distribution.
    ignore_index: a target id (the padding id) whose positions count neither in the sum nor in the mean.
    """
    if not isinstance(logits, Tensor):
        logits = Tensor(logits)
    if logits.ndim < 1:
        raise ValueError("cross_entropy: logits need a class axis, got a scalar")
    require_floating_point("cross_entropy", logits)
    check_label_smoothing("cross_entropy", label_smoothing)
    flat_targets = prepare_targets(logits, targets, ignore_index, num_classes=logits.shape[-1])
    flat_logits = logits if logits.ndim == 2 else logits.reshape(-1, logits.shape[-1])   # (N, V)
    return CrossEntropy(flat_targets, label_smoothing, ignore_index)(flat_logits)
