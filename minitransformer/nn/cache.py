"""The decoder's key/value cache for incremental decoding (chapter 9).

At inference the decoder produces one token at a time. Without a cache,
step t would re-run the decoder over all t positions so far — O(t²) work per
step in self-attention and O(t) in everything else. But under the causal mask
position i never looks at anything after i, so its keys and values never
change once computed. Keep them:

* self-attention: each step projects ONE new position and appends its key and
  value to those of the earlier steps; the new query attends to all t of them,
  O(t) work (linear attention, chapter 13, keeps instead its running sums
  Σ φ(k) vᵀ and Σ φ(k), whose size does not grow with t);
* cross-attention: the keys and values are projections of the encoder output,
  which is fixed for the whole sentence — compute them once, on the first step.

Beam search keeps several hypotheses per sentence in the batch axis and, after
each step, keeps the best ones: ``reorder(indices)`` picks those rows of every
cached array (the caller reorders its own memory and source mask the same way).
"""
from __future__ import annotations

from .. import backend
from ..tensor import Tensor


class AttentionCache:
    """Keys and values (B, h, t, d_k) of one attention sub-layer.

    ``static=False`` (self-attention): grows by one position per step.
    ``static=True`` (cross-attention): filled once, then read.
    """

    def __init__(self, static: bool) -> None:
        self.static = static
        self.keys: Tensor | None = None     # (B, h, t, d_k)
        self.values: Tensor | None = None   # (B, h, t, d_v)
        # a kind of attention with a recurrent form ("linear", chapter 13) keeps its running state instead
        # of the keys and values: arrays of a size that does not grow with t
        self.state: tuple | None = None
        self.steps = 0                      # positions folded into the state

    @property
    def length(self) -> int:
        """How many positions are cached (0 before the first step)."""
        if self.state is not None:
            return self.steps
        return 0 if self.keys is None else self.keys.shape[2]

    @property
    def nbytes(self) -> int:
        """The bytes this cache holds: keys and values, or the recurrent state."""
        arrays = list(self.state or ()) + [t.data for t in (self.keys, self.values) if t is not None]
        return sum(int(a.nbytes) for a in arrays)

    def reorder(self, indices) -> None:
        """Keep batch rows ``indices`` (any order, repeats allowed), in place."""
        if self.state is not None:
            indices = backend.to_device(_as_index_array(indices), backend.get_device(self.state[0]))
            self.state = tuple(a[indices] for a in self.state)
        if self.keys is None:
            return
        indices = backend.to_device(_as_index_array(indices), self.keys.device)
        self.keys = Tensor(self.keys.data[indices])       # (B', h, t, d_k)
        self.values = Tensor(self.values.data[indices])   # (B', h, t, d_v)


class LayerCache:
    """The two caches of one decoder layer: masked self-attention and encoder–decoder attention."""

    def __init__(self) -> None:
        self.self_attn = AttentionCache(static=False)
        self.cross_attn = AttentionCache(static=True)


class DecoderCache:
    """Everything ``Transformer.decode_step`` remembers between steps.

    ``layers[i]`` holds layer i's caches; ``position`` is the number of target
    positions decoded so far (the next step's position, for the positional encoding).
    """

    def __init__(self, n_layers: int) -> None:
        self.layers = [LayerCache() for _ in range(n_layers)]
        self.position = 0

    def __len__(self) -> int:
        return self.position

    def reorder(self, indices, same_sources: bool = False) -> None:
        """Keep/reorder batch rows for beam search, in place: row j becomes old row indices[j].

        Reorder ``memory`` and ``src_mask`` with the same indices before the next step.
        ``same_sources=True`` says that row j and old row indices[j] translate the same source
        sentence (beam search choosing among a sentence's own beams): the cross-attention
        keys and values, projections of that sentence's memory, are then already right and
        are not copied.
        """
        for layer in self.layers:
            layer.self_attn.reorder(indices)
            if not same_sources:
                layer.cross_attn.reorder(indices)

    def __repr__(self) -> str:
        return f"DecoderCache(layers={len(self.layers)}, position={self.position})"


def _as_index_array(indices, owner: str = "DecoderCache"):
    if isinstance(indices, Tensor):
        indices = indices.data
    if not backend.is_array(indices):
        indices = backend.xp_for("cpu").asarray(indices)
    if indices.ndim != 1 or indices.dtype.kind not in "iu":
        raise ValueError(f"{owner}.reorder: indices must be a 1-D integer array of batch rows, "
                         f"got shape {tuple(indices.shape)} and dtype {indices.dtype}")
    return indices
