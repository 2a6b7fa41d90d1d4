# %% [markdown]
# # Chapter 3 — CPU and GPU: one code path
#
# The paper trained its base model for 12 hours on 8 NVIDIA P100 GPUs (§5.2), and it chose
# dot-product attention partly because it "can be implemented using highly optimized matrix
# multiplication code" (§3.2.1). This notebook shows how our engine runs the same code on NumPy
# (CPU) and CuPy (GPU), and measures when a GPU is worth it.
#
# The GPU cells run only where `mt.cuda_available()` is True; everywhere else they print why they
# were skipped. The prose version is `chapters/03-cpu-gpu.md`.

# %% [markdown] ja
# # 第 3 章 — CPU と GPU：1 つのコードパス
#
# 論文はベースモデルを 8 台の NVIDIA P100 GPU で 12 時間学習させました（§5.2）。また、内積アテンションを選んだ理由の 1 つは、それが「高度に最適化された行列積のコードを使って実装できる」ことでした（§3.2.1）。このノートブックでは、本書のエンジンが同じコードを NumPy（CPU）と CuPy（GPU）の上で動かす仕組みを示し、GPU が割に合うのはいつかを測ります。
#
# GPU のセルは `mt.cuda_available()` が True の環境でだけ実行されます。それ以外の環境では、スキップした理由を表示します。文章版は `chapters/ja/03-cpu-gpu.md` です（英語版は `chapters/03-cpu-gpu.md`）。

# %%
import time

import numpy as np

import minitransformer as mt
from minitransformer import backend

from minitransformer.notebook_support import QUICK
GPU = mt.cuda_available()
rng = np.random.default_rng(0)
print("CuPy with a GPU available:", GPU)

# %% [markdown]
# ## 1. The backend: ask the array for its module
#
# NumPy and CuPy share one API: `cupy.exp`, `cupy.matmul` and friends mirror their NumPy
# namesakes. So an op never imports NumPy; it asks the backend which module owns its input:
#
# ```python
# xp = xp_of(x)        # numpy for a NumPy array, cupy for a CuPy array
# return xp.exp(x)
# ```

# %% [markdown] ja
# ## 1. バックエンド：配列にそのモジュールを尋ねる
#
# NumPy と CuPy は 1 つの API を共有しています。`cupy.exp` や `cupy.matmul` などは、NumPy の同名のものと同じ形をしています。そのため、演算は決して NumPy をインポートしません。入力を所有しているモジュールがどれかを、バックエンドに尋ねるのです。
#
# ```python
# xp = xp_of(x)        # numpy for a NumPy array, cupy for a CuPy array
# return xp.exp(x)
# ```

# %%
x = np.ones(3)
print(backend.xp_of(x).__name__, backend.get_device(x))


def softplus(x):
    """log(1 + e^x), written once for both devices."""
    xp = backend.xp_of(x)
    return xp.log1p(xp.exp(x))


print(softplus(np.array([-1.0, 0.0, 1.0])))

# %% [markdown]
# Moving data is explicit: `Tensor.to("cuda")` copies to the GPU, `.to("cpu")` back, and the
# gradient flows back across the copy. Mixing devices in one op is an error that names both,
# rather than a silent copy in the middle of a training step. Without CuPy, asking for the GPU
# says which wheel to install.

# %% [markdown] ja
# データの移動は明示的に行います。`Tensor.to("cuda")` は GPU へコピーし、`.to("cpu")` は元へ戻します。勾配はコピーを越えて逆向きに流れます。1 つの演算の中でデバイスが混ざっていると、学習ステップの途中で黙ってコピーするのではなく、両方の名前を挙げたエラーになります。CuPy がないのに GPU を求めると、どの wheel をインストールすればよいかが示されます。

# %%
t = mt.Tensor(rng.standard_normal((2, 3)), requires_grad=True)
if GPU:
    on_gpu = t.to("cuda")
    print(on_gpu.device, type(on_gpu.data))
    ((on_gpu * on_gpu).to("cpu")).sum().backward()
    np.testing.assert_allclose(t.grad, 2 * t.data)
    try:
        t + on_gpu
    except RuntimeError as error:
        print("RuntimeError:", error)
else:
    try:
        t.to("cuda")
    except RuntimeError as error:
        print("RuntimeError:", error)

# %% [markdown]
# ## 2. When does a GPU pay?
#
# A GPU has thousands of arithmetic units but every call costs a launch (several microseconds),
# and data must cross the PCIe bus to get there. The work of an $n \times n$ matrix product grows
# as $2n^3$ floating-point operations, the launch cost stays flat, so small products are
# overhead-bound and large ones compute-bound. First the CPU, measured here:

# %% [markdown] ja
# ## 2. GPU が割に合うのはいつか
#
# GPU には何千もの演算器がありますが、呼び出しのたびに起動のコスト（数マイクロ秒）がかかり、データは PCIe バスを越えてそこまで運ばなければなりません。$n \times n$ の行列積の仕事量は、浮動小数点の演算 $2n^3$ 回分として増えていきます。一方、起動のコストは一定です。そのため、小さな積はオーバーヘッド律速、大きな積は計算律速になります。まずは CPU を、ここで測ってみましょう。

# %%
def best_time(fn, repeats):
    """The fastest of ``repeats`` runs, in seconds (the least disturbed by other work)."""
    fn()  # warm-up: caches, lazy initialisation
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


sizes = [16, 64, 256] if QUICK else [16, 64, 256, 512, 1024]
rows = []
for n in sizes:
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    ta, tb = mt.Tensor(a), mt.Tensor(b)
    repeats = 3 if n >= 512 else 10
    numpy_s = best_time(lambda: a @ b, repeats)
    engine_s = best_time(lambda: ta @ tb, repeats)
    rows.append((n, numpy_s, engine_s, 2 * n ** 3 / numpy_s / 1e9))

print(f"{'n':>6} {'NumPy a@b':>12} {'mt.Tensor a@b':>14} {'GFLOP/s':>9}")
for n, numpy_s, engine_s, gflops in rows:
    print(f"{n:>6} {numpy_s * 1e6:>10.1f}µs {engine_s * 1e6:>12.1f}µs {gflops:>9.1f}")

# %% [markdown]
# Two things to read in the table. The engine's column is NumPy's plus a few microseconds of
# bookkeeping per op (Tensor, Function, graph), which matters at $n = 16$ and vanishes by
# $n = 256$. And the throughput (GFLOP/s) climbs with $n$: small products cannot keep the
# arithmetic units busy.
#
# Now the same products on the GPU, if there is one. `cupy` calls return before the GPU has
# finished, so we synchronize before reading the clock.

# %% [markdown] ja
# 表から読み取るべきことが 2 つあります。エンジンの列は、NumPy の列に演算ごとの数マイクロ秒の管理コスト（Tensor、Function、グラフ）を足したものです。これは $n = 16$ では効いてきますが、$n = 256$ になるころには消えてしまいます。そして、スループット（GFLOP/s）は $n$ とともに上がっていきます。小さな積では演算器を休みなく働かせることができないのです。
#
# 次に、GPU があれば、同じ積を GPU で計算します。`cupy` の呼び出しは GPU が計算を終える前に戻ってくるので、時計を読む前に同期をとります。

# %%
if GPU:
    import cupy

    def gpu_time(fn, repeats):
        def synchronized():
            fn()
            cupy.cuda.get_current_stream().synchronize()
        return best_time(synchronized, repeats)

    print(f"{'n':>6} {'CPU':>10} {'GPU':>10} {'GPU incl. copies':>17} {'speed-up':>9}")
    for n, numpy_s, _, _ in rows:
        a = rng.standard_normal((n, n)).astype(np.float32)
        b = rng.standard_normal((n, n)).astype(np.float32)
        ga, gb = cupy.asarray(a), cupy.asarray(b)
        device_s = gpu_time(lambda: ga @ gb, 10)
        round_trip_s = gpu_time(lambda: cupy.asnumpy(cupy.asarray(a) @ cupy.asarray(b)), 5)
        print(f"{n:>6} {numpy_s * 1e6:>8.1f}µs {device_s * 1e6:>8.1f}µs {round_trip_s * 1e6:>15.1f}µs "
              f"{numpy_s / device_s:>8.1f}×")
else:
    print("No GPU here: the GPU timings are skipped. On a machine with CuPy and a CUDA GPU this cell "
          "prints the same table for the GPU, with and without the host↔device copies.")

# %% [markdown]
# What to expect on a modern GPU: for $n \le 64$ the CPU wins or ties (launch and copy
# overheads dominate), around $n = 256$ the GPU pulls ahead, and for $n \ge 1024$ it is one to two
# orders of magnitude faster — *if the data stays on the GPU*. The column with copies shows why
# training keeps parameters, activations and gradients on the device and only brings a loss
# value back now and then.
#
# ## 3. Per-op overhead
#
# A Transformer step runs a few hundred ops per layer; on tiny tensors their bookkeeping is the
# cost. `benchmarks/speed/overhead.py` measures it against PyTorch, each library in its own process.
# Here, a quick look in-process:

# %% [markdown] ja
# 最近の GPU で予想される結果は次のとおりです。$n \le 64$ では CPU が勝つか互角です（起動とコピーのオーバーヘッドが支配的です）。$n = 256$ あたりで GPU が前に出て、$n \ge 1024$ では 1〜2 桁速くなります。ただしこれは*データが GPU 上にとどまっている場合*の話です。コピーを含めた列を見れば、学習がパラメータ、アクティベーション、勾配をデバイスに置いたまま、ときどき損失の値だけをホストへ戻す理由がわかります。
#
# ## 3. 演算ごとのオーバーヘッド
#
# Transformer の 1 ステップでは、1 層あたり数百の演算が実行されます。小さなテンソルでは、かかる時間のほとんどがこの管理コストです。`benchmarks/speed/overhead.py` は、各ライブラリを別々のプロセスで動かして、これを PyTorch と比べて測ります。ここでは同じプロセスの中で手短に見てみましょう。

# %%
small_a = mt.Tensor(np.ones((4, 4), np.float32), requires_grad=True)
small_b = mt.Tensor(np.full((4, 4), 0.5, np.float32), requires_grad=True)
n_ops = 200 if QUICK else 1000


def chain():
    y = small_a
    for i in range(n_ops):
        y = y * 0.999 if i % 2 == 0 else y + small_b
    return y


def chain_no_grad():
    with mt.no_grad():
        chain()


per_op = {
    "forward, no graph": best_time(chain_no_grad, 5) / n_ops * 1e6,
    "forward, graph": best_time(chain, 5) / n_ops * 1e6,
    "forward + backward": best_time(lambda: chain().sum().backward(), 5) / n_ops * 1e6,
}
for mode, us in per_op.items():
    print(f"{mode:>20}: {us:5.2f} µs per op")

# %% [markdown]
# ## 4. Gradient checks
#
# The same checks on the CPU and, where there is one, on the GPU: identical code, only the
# device of the inputs differs. `gradcheck` builds its random upstream gradient on the output's
# device.

# %% [markdown] ja
# ## 4. 勾配チェック
#
# 同じチェックを CPU で、そして GPU があれば GPU でも行います。コードはまったく同じで、違うのは入力のデバイスだけです。`gradcheck` はランダムな上流勾配を出力のデバイス上に作ります。

# %%
devices = ["cpu", "cuda"] if GPU else ["cpu"]
for device in devices:
    inputs = [mt.Tensor(backend.to_device(rng.standard_normal(s), device), requires_grad=True)
              for s in [(2, 3, 4), (4, 2)]]
    assert mt.gradcheck(lambda x, w: (x @ w).tanh().sum(axis=-1), inputs)
    ids = backend.to_device(np.array([0, 2, 0]), device)
    table = mt.Tensor(backend.to_device(rng.standard_normal((3, 4)), device), requires_grad=True)
    assert mt.gradcheck(lambda t: t[ids].exp() * 0.5, [table])
    host = mt.Tensor(rng.standard_normal((2, 2)), requires_grad=True)
    assert mt.gradcheck(lambda h: (h.to(device) * 3.0).to("cpu"), [host])
    print(f"gradcheck passed on {device}")

# %% [markdown]
# ## 5. The device double: the GPU path, checked without a GPU
#
# A NumPy call hidden in an op works on the CPU and breaks only on CuPy. The tests carry a
# stand-in for CuPy, `tests/device_double.py`, whose arrays live "on the device": they refuse
# every implicit conversion to NumPy with CuPy's own error, and the module offers only the
# names CuPy has. Put where the backend looks for CuPy, it makes `"cuda"` mean the double.
# It also counts every trip from device to host: on a GPU each one makes the host wait.

# %% [markdown] ja
# ## 5. デバイスダブル：GPU なしで GPU のパスを確かめる
#
# 演算の中に隠れた NumPy の呼び出しは、CPU では動き、CuPy の上で初めて壊れます。テストには CuPy の代役 `tests/device_double.py` があります。その配列は「デバイス上」にあり、NumPy への暗黙の変換を CuPy 自身のエラーですべて拒否します。また、このモジュールは CuPy にある名前しか提供しません。バックエンドが CuPy を探す場所にこれを置くと、`"cuda"` はダブルを意味するようになります。ダブルはデバイスからホストへの行き来もすべて数えます。GPU では、そのたびにホストが待たされるからです。

# %%
import sys
from pathlib import Path

repository = next((p for p in [Path.cwd(), *Path.cwd().parents] if (p / "tests" / "device_double.py").is_file()),
                  None)
if repository is None:
    print("tests/device_double.py not found from", Path.cwd(), "- skipping this section")
else:
    sys.path.insert(0, str(repository / "tests"))
    import device_double

    saved = backend._cupy, backend._cupyx
    backend._cupy, backend._cupyx = device_double.cupy, device_double.cupyx   # "cuda" is now the double
    try:
        x = mt.Tensor(rng.standard_normal((2, 3)), requires_grad=True)
        on_device = x.to("cuda")
        print(on_device.device, type(on_device.data))
        try:
            np.asarray(on_device.data)                # what a stray NumPy call in an op does
        except TypeError as error:
            print("TypeError:", error)

        layer = mt.nn.Linear(3, 4).to("cuda")
        (layer(on_device).tanh() ** 2).sum().backward()
        device_double.host_syncs.clear()
        norm = mt.optim.clip_grad_norm(layer.parameters(), 1.0)
        print(f"gradient norm {norm:.3f}, read with {sum(device_double.host_syncs.values())} host wait(s)")
        print("x's gradient came home to", x.grad.__class__.__name__, "on the CPU:", backend.get_device(x.grad))
    finally:
        backend._cupy, backend._cupyx = saved

# %% [markdown]
# ## Exercises
#
# {{exercises}}

# %% [markdown] ja
# ## 演習
#
# {{exercises}}
