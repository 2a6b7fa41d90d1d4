# %% [markdown]
# # Chapter 14 — More than one process: data parallelism over MPI
#
# One model, $p$ processes, each with its own batch. In this notebook we
# 1. check in one process that **the gradient of a sum is the sum of the gradients**, with the
#    token weights that make two batches' gradient that of one batch holding both,
# 2. build a **ring all-reduce** over simulated ranks and count what each rank sends: $2(p-1)/p\cdot N$,
# 3. train with **two real MPI ranks** (`mpiexec -n 2 ... train --distributed`) and translate with the
#    result in this one process,
# 4. end with the check: two ranks' averaged gradient equals this process's gradient of the whole batch
#    to $10^{-12}$ in float64.

# %% [markdown] ja
# # 第 14 章 — 複数のプロセスで：MPI によるデータ並列
#
# 1 つのモデルを $p$ 個のプロセスで学習します。各プロセスは自分のバッチを持ちます。このノートブックでは次のことを行います。
# 1. 1 つのプロセスの中で、**和の勾配は勾配の和**であることを確かめます。2 つのバッチの勾配を、両方を含む 1 つのバッチの勾配にするトークン数の重みも一緒に確かめます。
# 2. 模擬的なランクの上に**リング・オールリデュース**を作り、各ランクが送る数 $2(p-1)/p\cdot N$ を数えます。
# 3. **本物の 2 つの MPI ランク**で学習し（`mpiexec -n 2 ... train --distributed`）、その結果をこの 1 つのプロセスに読み込んで翻訳します。
# 4. 最後に確認します。float64 で、2 つのランクが平均した勾配は、このプロセスのバッチ全体の勾配と $10^{-12}$ まで一致します。

# %%
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from minitransformer.data.batching import collate
from minitransformer.nn.transformer import Transformer, TransformerConfig
from minitransformer.training.trainer import batch_loss
from minitransformer.translator import Translator

from minitransformer.notebook_support import QUICK
ROOT = next(p for p in (Path.cwd().resolve(), *Path.cwd().resolve().parents) if (p / "minitransformer").is_dir())
rng = np.random.default_rng(0)

config = TransformerConfig(src_vocab_size=23, tgt_vocab_size=23, d_model=16, n_heads=2, d_ff=32, n_layers=1,
                           dropout=0.0, max_len=32, seed=5)
examples = [(list(rng.integers(3, 23, rng.integers(2, 9))), list(rng.integers(3, 23, rng.integers(2, 9))))
            for _ in range(8)]


def gradients(indices):
    """(loss, gradients, target tokens) of a fresh float64 copy of the model on the examples at ``indices``."""
    model = Transformer(config).to(np.float64)
    batch = collate(examples, indices, pad_id=0, bos_id=1, eos_id=2)
    loss = batch_loss(model, batch)
    loss.backward()
    return loss.item(), [p.grad for p in model.parameters()], batch.n_tgt_tokens


# %% [markdown]
# ## 1. The gradient of a sum is the sum of the gradients
#
# The loss of a batch is the mean over its $n$ target tokens, $L = \frac1n\sum_i \ell_i$. Split the
# batch between two ranks with $n_0$ and $n_1$ tokens: each rank computes $g_r = \nabla L_r$ of its own
# mean. The gradient of the whole batch is then
#
# $$\nabla L = \frac{1}{n_0+n_1}\left(n_0\, g_0 + n_1\, g_1\right),$$
#
# not the plain mean $\frac12(g_0+g_1)$, unless $n_0 = n_1$.

# %% [markdown] ja
# ## 1. 和の勾配は勾配の和
#
# バッチの損失は、目的言語側の $n$ 個のトークンについての平均 $L = \frac1n\sum_i \ell_i$ です。このバッチを、トークンが $n_0$ 個と $n_1$ 個の 2 つのランクに分けます。各ランクは自分の平均の勾配 $g_r = \nabla L_r$ を計算します。するとバッチ全体の勾配は次のとおりです。
#
# $$\nabla L = \frac{1}{n_0+n_1}\left(n_0\, g_0 + n_1\, g_1\right),$$
#
# これは、$n_0 = n_1$ でない限り、単純な平均 $\frac12(g_0+g_1)$ とは一致しません。

# %%
loss_all, g_all, n_all = gradients(range(8))
loss_0, g_0, n_0 = gradients(range(4))
loss_1, g_1, n_1 = gradients(range(4, 8))
weighted = [(n_0 * a + n_1 * b) / (n_0 + n_1) for a, b in zip(g_0, g_1)]
plain = [(a + b) / 2 for a, b in zip(g_0, g_1)]
print(f"tokens: {n_0} + {n_1} = {n_all}")
print("weighted by tokens, largest difference:", max(np.abs(w - g).max() for w, g in zip(weighted, g_all)))
print("plain mean,         largest difference:", max(np.abs(w - g).max() for w, g in zip(plain, g_all)))
assert max(np.abs(w - g).max() for w, g in zip(weighted, g_all)) < 1e-12
assert abs((n_0 * loss_0 + n_1 * loss_1) / (n_0 + n_1) - loss_all) < 1e-12      # the loss too

# %% [markdown]
# ## 2. A ring all-reduce, and what it sends
#
# $p$ ranks sit on a ring; each cuts its vector of $N$ numbers into $p$ chunks. In $p-1$ steps of
# **reduce-scatter**, every rank sends one chunk to its right neighbour and adds the chunk it gets from
# its left one; afterwards rank $r$ holds the full sum of chunk $r+1$. In $p-1$ steps of **all-gather**
# the finished chunks go round the ring once more. Every rank sends $2(p-1)$ chunks of $N/p$ numbers:
# $2\frac{p-1}{p}N$, which approaches $2N$ and never grows with $p$.

# %% [markdown] ja
# ## 2. リング・オールリデュースと、それが送るもの
#
# $p$ 個のランクが環状に並び、それぞれが $N$ 個の数のベクトルを $p$ 個のチャンクに切ります。**リデュース・スキャッタ**の $p-1$ ステップでは、各ランクがチャンクを 1 つ右隣に送り、左隣から受け取ったチャンクを足します。終わると、ランク $r$ はチャンク $r+1$ の完全な和を持っています。**オールギャザ**の $p-1$ ステップでは、完成したチャンクがもう一度リングを回ります。各ランクは $N/p$ 個の数のチャンクを $2(p-1)$ 個送ります。合わせて $2\frac{p-1}{p}N$ 個で、これは $2N$ に近づきますが、$p$ とともに増えることはありません。

# %%
def ring_all_reduce(vectors):
    """Sum ``vectors`` (one per simulated rank) the way a ring does; returns (results, numbers sent per rank)."""
    p = len(vectors)
    chunks = [np.array_split(v.astype(np.float64), p) for v in vectors]   # chunks[rank][c]
    sent = [0] * p
    for step in range(p - 1):                                # reduce-scatter
        outgoing = [(r, (r - step) % p, chunks[r][(r - step) % p].copy()) for r in range(p)]
        for r, c, data in outgoing:
            chunks[(r + 1) % p][c] += data
            sent[r] += data.size
    for step in range(p - 1):                                # all-gather: pass the finished chunks on
        outgoing = [(r, (r + 1 - step) % p, chunks[r][(r + 1 - step) % p].copy()) for r in range(p)]
        for r, c, data in outgoing:
            chunks[(r + 1) % p][c] = data
            sent[r] += data.size
    return [np.concatenate(c) for c in chunks], sent


N = 1200
for p in (2, 3, 4, 8):
    vectors = [rng.standard_normal(N) for _ in range(p)]
    results, sent = ring_all_reduce(vectors)
    assert all(np.allclose(r, sum(vectors), atol=1e-12) for r in results)
    assert sent == [2 * (p - 1) * N // p] * p
    print(f"p = {p}: each rank sent {sent[0]:>5} numbers = 2(p-1)/p * N = {2 * (p - 1) / p * N:.0f}")

# %% [markdown]
# ## 3. Two real ranks
#
# `mpiexec -n 2` starts two copies of the command; each learns its place with mpi4py. Rank 0 writes
# the run folder and prints; both train. mpi4py and an MPI library come from PyPI
# (`pip install mpi4py mpich`); without them this section says so and the last check runs on the ring
# of section 2 instead. (Where the suite requires MPI, `MT_REQUIRE_MPI=1`, their absence is an error.)

# %% [markdown] ja
# ## 3. 本物の 2 つのランク
#
# `mpiexec -n 2` はコマンドのコピーを 2 つ起動し、それぞれが mpi4py から自分の位置を知ります。ランク 0 が実行フォルダを書いて表示し、両方が学習します。mpi4py と MPI のライブラリは PyPI から入手できます（`pip install mpi4py mpich`）。それらがなければ、この節はそのことを伝え、最後の確認は代わりに 2 節のリングの上で行います。（テストスイートが MPI を必須とする場合、つまり `MT_REQUIRE_MPI=1` のときは、それらがないことはエラーになります。）

# %%
def find_mpiexec():
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return None
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else shutil.which("mpiexec")


MPIEXEC = find_mpiexec()
if MPIEXEC is None and os.environ.get("MT_REQUIRE_MPI") == "1":
    raise RuntimeError("MT_REQUIRE_MPI=1, but mpi4py or mpiexec is missing: pip install mpi4py mpich")
print("mpiexec:", MPIEXEC or "not installed (pip install mpi4py mpich)")
ENV = dict(os.environ, PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1",
           OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")   # Open MPI as root; MPICH ignores them
work = Path(tempfile.mkdtemp(prefix="chapter14-"))

# %%
if MPIEXEC:
    steps = "10" if QUICK else "300"
    command = [MPIEXEC, "-n", "2", sys.executable, "-m", "minitransformer", "train", "--distributed",
               "--out", str(work / "run"), "--preset", "toy", "--steps", steps, "--no-eval", "--average", "1"]
    if QUICK:
        command += ["--limit", "100"]
    done = subprocess.run(command, env=ENV, capture_output=True, text=True, timeout=600)
    print(done.stdout[-1500:])
    assert done.returncode == 0, done.stderr[-2000:]
    state = json.loads((work / "run" / "checkpoints" / f"step-{int(steps):06d}" / "state.json").read_text())
    print("the checkpoint says ranks =", state["ranks"], "and keeps", len(state["rng_ranks"]), "dropout states")

# %% [markdown]
# The checkpoint is an ordinary one: this single process loads it and translates.

# %% [markdown] ja
# このチェックポイントはふつうのものです。この単一のプロセスで読み込み、翻訳できます。

# %%
if MPIEXEC:
    translator = Translator.load(str(work / "run"))
    print(translator.translate(["the cat ate the fish ."], beam_size=1, warn_unseen=False))   # a toy model, few steps

# %% [markdown]
# ## 4. The check: two ranks' gradient is the gradient of the whole batch
#
# Each rank takes half of the eight examples, computes its gradient and calls
# `distributed.average_gradients`: one all-reduce of one flat buffer. Rank 0 saves the result, and this
# process compares it with its own gradient of all eight examples from section 1.

# %% [markdown] ja
# ## 4. 確認：2 つのランクの勾配は、バッチ全体の勾配
#
# 各ランクは 8 個の例の半分ずつを受け取り、自分の勾配を計算して `distributed.average_gradients` を呼びます。1 つの平坦なバッファに対する、1 回のオールリデュースです。ランク 0 が結果を保存し、このプロセスがそれを、1 節で計算した 8 個すべての例についての自分の勾配と比べます。

# %%
script = work / "two_ranks.py"
script.write_text(f"""
import numpy as np
from minitransformer.training import distributed
from minitransformer.data.batching import collate
from minitransformer.nn.transformer import Transformer, TransformerConfig
from minitransformer.training.trainer import batch_loss

world = distributed.init_world()
config = TransformerConfig(**{dataclasses.asdict(config)!r})
examples = {[[list(map(int, s)), list(map(int, t))] for s, t in examples]!r}
model = Transformer(config).to(np.float64)
distributed.broadcast_parameters(world, model.parameters())
mine = range(4) if world.rank == 0 else range(4, 8)
batch = collate(examples, list(mine), pad_id=0, bos_id=1, eos_id=2)
loss = batch_loss(model, batch)
loss.backward()
totals = distributed.average_gradients(world, model.parameters(), loss.item(), batch.n_tgt_tokens)
if world.is_root:
    np.savez("{work / 'averaged.npz'}", loss=totals.loss, *[p.grad for p in model.parameters()])
""")
if MPIEXEC:
    done = subprocess.run([MPIEXEC, "-n", "2", sys.executable, str(script)], env=ENV, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    saved = np.load(work / "averaged.npz")
    averaged, loss_two = [saved[f"arr_{i}"] for i in range(len(g_all))], float(saved["loss"])
else:                                       # no MPI here: the ring of section 2 stands in for it
    flat = [np.concatenate([n * g.ravel() for g in grads] + [[n]]) for grads, n in ((g_0, n_0), (g_1, n_1))]
    total = ring_all_reduce(flat)[0][0]
    sizes = np.cumsum([g.size for g in g_all])[:-1]
    averaged = [a.reshape(g.shape) for a, g in zip(np.split(total[:-1] / total[-1], sizes), g_all)]
    loss_two = (n_0 * loss_0 + n_1 * loss_1) / (n_0 + n_1)
worst = max(np.abs(a - g).max() for a, g in zip(averaged, g_all))
print(f"{'two MPI ranks' if MPIEXEC else 'simulated ring'}: largest difference from one process's gradient {worst:.1e}")
assert worst < 1e-12 and abs(loss_two - loss_all) < 1e-12
shutil.rmtree(work)
