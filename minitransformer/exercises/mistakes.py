"""The mistakes students really make, exercise by exercise, and the verdict each should get.

Teacher's edition only: each mistake is written as a small edit of the solution block's own lines
(``old`` -> ``new``, every occurrence inside the exercise's blocks), so this file quotes the
solutions, and the student edition leaves it out (edition.TEACHER_ONLY).

The teacher's casebook (casebook.py) runs each mistake on every case and keeps what it gives, so that
``grade`` can name a wrong result that equals a known mistake's; tests/exercises/test_mistakes.py feeds each
mistake in as a submission and checks that its verdict names it.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mistake:
    name: str                                   # short, unique within its exercise
    verdict: str                                # what the student reads
    edits: tuple[tuple[str, str], ...]          # (old, new), applied in order inside the exercise's blocks


def _m(name: str, verdict: str, *edits: tuple[str, str]) -> Mistake:
    return Mistake(name, verdict, tuple(edits))


CATALOGUE: dict[str, list[Mistake]] = {
    "1.1": [
        _m("one step, not two", "the two evaluations are 2ε apart (x − ε to x + ε): divide their difference by 2ε",
           ("(plus - minus) / (2 * eps)", "(plus - minus) / eps")),
        _m("nudge left in place", "x_i must be put back after the two evaluations, or every later coordinate and "
           "every later check sees a moved input", ("flat_x[i] = original\n", "pass\n")),
        _m("upstream ignored", "the scalar whose derivative is taken is Σ upstream ⊙ fn(x): weight the output by the "
           "upstream gradient before summing", (" * upstream)", ")")),
    ],
    "1.2": [
        _m("no requires_grad guard", "an input that needs no gradient (a constant such as the 4.0 of t / 4.0) must get "
           "None, as the Function contract says: check self.inputs[i].requires_grad before computing its gradient",
           (" if self.inputs[0].requires_grad else None", ""), (" if self.inputs[1].requires_grad else None", "")),
        _m("sign of the denominator's gradient", "d(a/b)/db = −a/b²: the minus sign is missing",
           ("-gy * a / (b * b)", "gy * a / (b * b)")),
        _m("b, not b²", "d(a/b)/db = −a/b²: divide by b squared, not by b", ("-gy * a / (b * b)", "-gy * a / b")),
    ],
    "2.1": [
        _m("leading axes kept", "the axes broadcasting put in front of the shape must be summed away first",
           ("grad = grad.sum(axis=tuple(range(leading)))", "pass")),
        _m("stretched axes dropped", "a size-1 axis that broadcasting stretched must be summed with keepdims=True, so "
           "that it stays as size 1", ("keepdims=True", "keepdims=False")),
        _m("mean instead of sum", "each input value was used once per copy: its gradient is the sum of the copies' "
           "gradients, not their mean", (".sum(", ".mean(")),
    ],
    "2.2": [
        _m("B not transposed", "dL/dA = G Bᵀ: B must be transposed (swapaxes(-1, -2)); G @ B does not even fit the "
           "shapes", ("gy @ b2.swapaxes(-1, -2)", "gy @ b2")),
        _m("A not transposed", "dL/dB = Aᵀ G: A must be transposed", ("a2.swapaxes(-1, -2) @ gy", "a2 @ gy"),
           ("a2.reshape(-1, k).T @", "a2.reshape(-1, k) @")),
        _m("broadcast batch of B not summed", "when B was broadcast over batch axes, its gradient must be summed over "
           "them (unbroadcast to B's shape)", ("unbroadcast(a2.swapaxes(-1, -2) @ gy, b2.shape)",
                                               "a2.swapaxes(-1, -2) @ gy")),
    ],
    "2.3": [
        _m("ties not shared", "tied maxima share the gradient: each of k winners gets 1/k of it",
           ("winners / winners.sum(axis=self.axes, keepdims=True)", "winners")),
        _m("sum's gradient not spread", "every summed x_i contributed once: copy gy to x's whole shape "
           "(broadcast_to)", ("xp_of(gy).broadcast_to(gy, self.shape)", "gy")),
    ],
    "2.4": [
        _m("repeats overwrite", "a position read several times gets the sum of their gradients: gx[index] = gy (or "
           "+= gy) keeps only one of them; add them (scatter_add, np.add.at)",
           ("scatter_add(gx, self.index, gy)", "gx[self.index] = gy")),
        _m("basic index not filled", "for a slice or an int index the gradient must still be put where x was read",
           ("gx[self.index] = gy ", "pass ")),
    ],
    "4.1": [
        _m("sum term forgotten", "gx = y ⊙ (gy − Σ gy ⊙ y): the Σ term, subtracted along the softmax's axis, is "
           "missing", ("gx -= y * gx.sum(axis=self.axis, keepdims=True)", "pass")),
        _m("sum over the last axis", "sum along the softmax's own axis (self.axis), not always the last one",
           ("gx.sum(axis=self.axis, keepdims=True)", "gx.sum(axis=-1, keepdims=True)")),
        _m("sum of gy alone", "the sum is Σ gy ⊙ y, not Σ gy", ("y * gx.sum(", "y * gy.sum(")),
    ],
    "4.2": [
        _m("log-probabilities used as probabilities", "z is log-softmax: exp(z) recovers the softmax",
           ("xp.exp(z)", "z.copy()")),
        _m("Σ gy forgotten", "gx = gy − softmax · Σ gy: the softmax is weighted by the sum of the upstream gradient",
           ("gx *= -gy.sum(axis=self.axis, keepdims=True)", "gx *= -1")),
        _m("sign of the softmax term", "gx = gy − softmax · Σ gy: the softmax term is subtracted",
           ("gx *= -gy.sum(", "gx *= gy.sum(")),
    ],
    "4.3": [
        _m("not divided by the count", "the loss is a mean over the counted rows: divide by their number (n_valid)",
           ("(gy / self.n_valid)", "(gy * 1.0)")),
        _m("padding rows not zeroed", "rows whose target is ignore_index (padding) get no gradient at all",
           ("xp.where(self.valid, scale, 0)", "xp.where(self.valid, scale, scale)")),
        _m("ε over every class", "with ignore_index set, ε is spread over the V − 1 classes other than the pad class, "
           "which gets none", ("spread = self._smoothing_classes(num_classes)", "spread = num_classes")),
    ],
    "5.1": [
        _m("mean(g) term forgotten", "gx = (1/σ)(g − mean(g) − x̂ ⊙ mean(g ⊙ x̂)): the mean(g) term (through the "
           "mean μ) is missing", ("g - mean_g - x_hat", "g - x_hat")),
        _m("x̂ term forgotten", "gx = (1/σ)(g − mean(g) − x̂ ⊙ mean(g ⊙ x̂)): the x̂ ⊙ mean(g ⊙ x̂) term (through "
           "σ) is missing", (" - x_hat * mean_g_x_hat)", ")")),
        _m("1/σ forgotten", "every term of gx is divided by σ (multiplied by inv_std)", ("gx = inv_std * (g", "gx = (g")),
    ],
    "6.1": [
        _m("mask inverted", "the mask is inverted: True means the key MAY be attended to, so the scores to hide are "
           "where the mask is False (~mask)", ("~mask", "mask")),
        _m("mask forgotten", "the mask is not applied: the scores of masked keys must become −∞ before the softmax",
           ("xp.copyto(scores, -xp.inf, where=~mask)", "pass")),
        _m("a large negative number, not −∞", "with a finite number such as −1e9, a query whose every key is masked "
           "attends to all of them equally instead of getting zeros: use −∞", ("-xp.inf", "-1e9")),
    ],
    "6.2": [
        _m("row sum forgotten", "the softmax backward is gS = A ⊙ (gA − Σ_j gA ⊙ A): the row sum is missing",
           ("g_scores -= row_sum(g_scores * weights)", "pass")),
        _m("1/√d_k forgotten", "S = Q Kᵀ/√d_k: the gradients of Q and K carry the 1/√d_k too",
           ("g_scores *= self.scale", "pass")),
        _m("gS not transposed for K", "gK = gSᵀ Q: the scores' gradient is transposed for the keys",
           ("g_scores.swapaxes(-1, -2) @ q", "g_scores @ q")),
    ],
    "6.3": [
        _m("future visible", "position i may see positions j ≤ i: that is the lower triangle (tril), not the upper",
           ("xp.tril(", "xp.triu(")),
        _m("diagonal left out", "position i must also see itself (j = i): keep the diagonal",
           ("dtype=bool))", "dtype=bool), -1)")),
        _m("no batch and head axes", "the mask is (1, 1, T, T), so that it broadcasts over the batch and the heads",
           ("[None, None]", "")),
    ],
    "6.4": [
        _m("tanh's derivative forgotten", "the gradient flows through tanh on its way from vᵀ to u: multiply by "
           "1 − a² (a = tanh(u), the saved hidden array)", ("g_pre *= 1 - hidden * hidden", "pass")),
        _m("sums over the wrong axes", "each query t met every key j: g_q sums g_u over the keys (axis 2), g_k over "
           "the queries (axis 1)", ("g_pre.sum(axis=2)", "g_pre.sum(axis=@)"), ("g_pre.sum(axis=1)", "g_pre.sum(axis=2)"),
           ("g_pre.sum(axis=@)", "g_pre.sum(axis=1)")),
        _m("g_v without the upstream gradient", "∂L/∂v = Σ g_e,tj a_tj: weight each hidden vector by its score's "
           "upstream gradient before summing", ("@ g_scores.reshape(-1)", "@ (0 * g_scores.reshape(-1) + 1)")),
    ],
    "7.1": [
        _m("split without the transpose", "(B, T, h·d_k) -> (B, T, h, d_k) -> transpose to (B, h, T, d_k): reshaping "
           "straight to (B, h, T, d_k) mixes positions and features",
           ("x = x.reshape(batch, length, n_heads, width // n_heads)",
            "x = x.reshape(batch, n_heads, length, width // n_heads)"), ("return x.transpose(0, 2, 1, 3)", "return x")),
        _m("merge without the transpose", "merging transposes (B, h, T, d_k) back to (B, T, h, d_k) before the reshape",
           ("x = x.transpose(0, 2, 1, 3)", "x = x")),
    ],
    "8.1": [
        _m("sin and cos swapped", "even columns 2i are sin, odd columns 2i+1 are cos",
           ("numpy.sin(angles[:, 0::2])", "numpy.cos(angles[:, 0::2])"),
           ("numpy.cos(angles[:, 1::2])", "numpy.sin(angles[:, 1::2])")),
        _m("a frequency per column", "columns 2i and 2i+1 share one frequency, 10000^(−2i/d_model)",
           ("numpy.arange(d_model) // 2 * 2", "numpy.arange(d_model)")),
        _m("exponent's sign", "the frequencies fall with i: ω_i = 10000^(−2i/d_model)",
           ("-math.log(10000.0)", "math.log(10000.0)")),
    ],
    "10.1": [
        _m("factor forgotten", "the rate is multiplied by the schedule's factor", ("self.factor * ", "")),
        _m("warm-up exponent", "during warm-up the rate is step · warmup^−1.5 (times d_model^−0.5)",
           ("self.warmup ** -1.5", "self.warmup ** -0.5")),
        _m("max instead of min", "eq. 3 takes the smaller of step^−0.5 and step · warmup^−1.5", ("min(", "max(")),
    ],
    "11.1": [
        _m("k candidates, not 2k", "keep the 2k best extensions: up to k of them may end in eos, and k must stay alive",
           ("2 * k)", "k)")),
        _m("beam scores not added", "an extension's score is its beam's log-probability so far plus the new token's: "
           "add alive_log_prob", ("xp.asarray(alive_log_prob[:, :, None], dtype=log_probs.dtype)", "0")),
    ],
    "11.2": [
        _m("counts not clipped", "each n-gram counts at most as often as it occurs in the reference (clip with min)",
           ("min(count, ref_counts[gram])", "(count if gram in ref_counts else 0)")),
        _m("tokens counted, not n-grams", "a sentence of L tokens has L − n + 1 n-grams (0 when shorter than n)",
           ("max(len(hypothesis) - n + 1, 0)", "len(hypothesis)")),
        _m("negative total", "a sentence shorter than n has no n-gram: the total is max(L − n + 1, 0), never negative",
           ("max(len(hypothesis) - n + 1, 0)", "len(hypothesis) - n + 1")),
    ],
    "11.3": [
        _m("overlap merged", "after a merge, skip both tokens of the pair (i += 2): [a, a, a] with (a, a) gives "
           "[aa, a]", ("i += 2", "i += 1")),
        _m("last token dropped", "the last token is kept when it is not part of a pair",
           ("while i < len(ids):", "while i < len(ids) - 1:")),
    ],
    "12.1": [
        _m("every link sure", "sure links are those of rows with exactly one gold partner; the others are only "
           "possible", ("if len(sources) == 1 ", "")),
        _m("recall's denominator", "AER = 1 − (|A∩S| + |A∩P|) / (|A| + |S|): the denominator counts the sure links",
           ("(len(predicted) + len(sure))", "(len(predicted) + len(possible))")),
        _m("1 − forgotten", "AER = 1 − (|A∩S| + |A∩P|) / (|A| + |S|): 0 is a perfect head", ("return 1.0 - (", "return (")),
    ],
    "12.2": [
        _m("one FLOP per multiply-add", "a multiply-add is 2 FLOPs: an (m × k)(k × n) product costs 2mkn",
           ("4 * 2 * d_model", "4 * d_model"), ("2 * 2 * source_len", "2 * source_len"),
           ("2 * 2 * d_model * d_ff", "2 * d_model * d_ff")),
        _m("attention forgotten", "the scores q·kᵀ and the mix A·V cost 2·2·S·d_model too",
           (" + scores_and_mix", "")),
        _m("one matrix of the FFN", "the feed-forward network has two matrices, W_1 (d × d_ff) and W_2 (d_ff × d)",
           ("2 * 2 * d_model * d_ff", "2 * d_model * d_ff")),
    ],
    "13.1": [
        _m("running sum not rescaled", "when the maximum grows from m to m', the running sum ℓ must be rescaled by "
           "e^(m − m') before the new block's terms are added", ("rescale * row_sum + ", "row_sum + ")),
        _m("running output not rescaled", "when the maximum grows from m to m', the running output a must be rescaled "
           "by e^(m − m') too", ("rescale * weighted + ", "weighted + ")),
        _m("−∞ − (−∞)", "a row that has seen only −∞ keeps m = −∞: shift by 0 there, or exp(−∞ − (−∞)) is NaN",
           ("shift = xp.where(xp.isneginf(new_max), 0, new_max)", "shift = new_max")),
    ],
    "13.2": [
        _m("O forgotten", "D_i = Σ_e gO_ie O_ie: the row sum of gO ⊙ O, not of gO alone",
           ("(g_out * out).sum(", "g_out.sum(")),
        _m("no keepdims", "D is (..., T, 1), one number per row, kept as a column (keepdims=True)",
           ("keepdims=True", "keepdims=False")),
    ],
    "13.3": [
        _m("diagonal left out", "inside a chunk, position i sees keys j ≤ i, itself included: keep the diagonal (tri "
           "with k=0)", ("xp.tri(fq.shape[-2], dtype=fq.dtype)", "xp.tri(fq.shape[-2], k=-1, dtype=fq.dtype)")),
        _m("totals not carried", "the running totals KV and z must be carried to the next chunk",
           ("kv = kv + fk.swapaxes(-1, -2) @ fv", "kv = kv"), ("z = z + fk.sum(axis=-2, keepdims=True)", "z = z")),
        _m("the whole chunk visible", "inside a chunk, position i may only see keys j ≤ i: multiply by the lower "
           "triangle", ("(fq @ fk.swapaxes(-1, -2)) * lower", "(fq @ fk.swapaxes(-1, -2))")),
    ],
    "13.4": [
        _m("read before the update", "position i sees itself: add φ(k_i) v_iᵀ and φ(k_i) to the state first, then "
           "read it with φ(q_i)", ("num = (phi_q[..., None, :] @ kv)[..., 0, :]", "num = (phi_q[..., None, :] @ (kv - "
                                   "phi_k[..., :, None] * v[..., None, :]))[..., 0, :]"),
           ("den = (phi_q * z).sum(", "den = (phi_q * (z - phi_k)).sum(")),
        _m("outer product the wrong way", "the state S = Σ φ(k) vᵀ is d_k × d_v: φ(k) is the column, v the row",
           ("phi_k[..., :, None] * v[..., None, :]", "v[..., :, None] * phi_k[..., None, :]")),
        _m("normaliser not carried", "z = Σ φ(k) is a running sum too: add φ(k_i) to it at every step",
           ("z = z + phi_k", "z = phi_k")),
    ],
    "13.5": [
        _m("dilation ignored", "a dilated window sees every d-th key only: j − i must be a multiple of d as well",
           (" & (offset % dilation == 0)", "")),
        _m("window not stretched", "with dilation d the window reaches w·d positions a side, not w",
           ("<= window * dilation", "<= window")),
        _m("global one way only", "a global token sees every position and every position sees it: both the row "
           "and the column", ("allowed | is_global | is_global.T", "allowed | is_global")),
    ],
}


def mutate(texts: dict[str, str], exercise_id: str, mistake: Mistake) -> dict[str, str]:
    """The files (path -> text) holding the exercise's solution blocks, with the mistake's edits made in them.

    Each edit replaces every occurrence of its ``old`` inside the exercise's blocks (marker lines
    excluded) and must find at least one.
    """
    from .registry import parse_file

    changed = {}
    found = {old: False for old, _ in mistake.edits}
    for path, text in texts.items():
        lines = text.splitlines(keepends=True)
        blocks = [b for info, b in parse_file(text, path) if info["id"] == exercise_id and b.begin is not None]
        for block in sorted(blocks, key=lambda b: -b.begin):
            inner = "".join(lines[block.begin:block.end - 1])
            for old, new in mistake.edits:
                if old in inner:
                    found[old] = True
                    inner = inner.replace(old, new)
            lines[block.begin:block.end - 1] = [inner]
        changed[path] = "".join(lines)
    missing = [old for old, seen in found.items() if not seen]
    if missing:
        raise ValueError(f"Exercise {exercise_id}, mistake {mistake.name!r}: {missing[0]!r} is not in its solution "
                         "any more; update the catalogue (minitransformer/exercises/mistakes.py)")
    return changed
