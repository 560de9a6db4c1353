#!/usr/bin/env python3
"""Peers for the ferrotile library benchmark, timed the same way in the same run.

PyTorch eager, torch.compile (Inductor's Triton kernels) and Liger-Kernel
(pure Triton, when its wheel is installed) for softmax, layer_norm and rms_norm on the shapes/dtypes of `bench`: inputs rotated over
buffer copies so repetitions miss L2, batches of 10 calls replayed from a
CUDA graph and timed with CUDA events (device time, no Python overhead),
median over batches, device-copy bandwidth measured in the same process.

`--gemm`: cuBLAS through torch.matmul on the shapes of `bench --gemm`
(bf16/f16 4096^3, 8192^3, 16x8192x8192; f32 4096^3 with TF32 allowed and
exact), same timing, TFLOP/s.

`--gemm-decode`: only the decode shape (bf16, f16), timed both from a CUDA
graph and as back-to-back calls (ferrotile's bench reports both too), to
show what the method alone is worth at ~35 us a call.

`--gemm --gemm-shape MxNxK [--dtypes bf16,f16]`: those cases only.
`--shapes RxC,..`: the row kernels on those shapes only (as `bench --shapes`).

`--attention [--attn-shapes B:H:S:D,..]`: attention forward (bf16, f16;
causal and not) on `[batch, heads, seq, dim]` tensors: SDPA with each
backend forced (cuDNN, FlashAttention-2, memory-efficient) and a Triton
FlashAttention-2 kernel of the algorithm `attn-user` writes in the DSL
(pointer loads, online softmax in exp2, one program per BM query rows of a
head), tuned over a small config grid; TFLOP/s = 4·b·h·s²·d, halved for
causal.

`--dequant [--dq-shapes MxNxK,..]`: the W4A16 peers of `dequant-user`
(group 128, bf16): cuBLAS bf16 dense `x · Wᵀ`, a Triton kernel of the same
algorithm (checked against f64, best of five configurations), gemlite
(its wheel travels in .whl/, see gpu-run.sh) and torch's tinygemm (`aten._weight_int4pack_mm`), µs and the ratio to dense.

`--attn-backward [--attn-shapes ..]`: attention backward (see
`attention_backward_peers`).

`--decode [--decode-shapes B:H:HK:SQ:SK:D,..]`: decode attention, SDPA per
backend (µs, K/V read GB/s).

`--suite`: the Triton twins of `user-suite` (issue 20's generality suite).

usage: peers.py [--attention [--attn-shapes ..] [--attn-group G]] [--attn-backward [--attn-shapes ..]] [--decode [--decode-shapes ..]] [--dequant [--dq-shapes ..]] [--w8a8|--fp8 [--w8-shapes ..]] [--quick] [--json FILE] [--shapes RxC,..] [--gemm [--gemm-shape MxNxK] [--dtypes ..] | --gemm-decode]
"""
import json, sys, torch
import torch.nn.functional as F

ROTATE = 512 << 20

BATCH = 10

def timeit(fn, n_copies, reps, graph=True):
    """Median device time per call over batches of BATCH calls. Peers are
    captured in a CUDA graph (replay has no Python/dispatcher overhead, so
    torch.compile's guards do not count against it); if capture fails the
    batch is issued back to back."""
    for i in range(3):
        fn(i % n_copies)
    torch.cuda.synchronize()
    run = None
    if graph:
        try:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for i in range(3):
                    fn(i % n_copies)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for i in range(BATCH):
                    fn(i % n_copies)
            run = g.replay
        except Exception as e:
            print(f"  (no CUDA graph: {type(e).__name__}; timing back-to-back calls)")
            torch.cuda.synchronize()
    if run is None:
        run = lambda: [fn(i % n_copies) for i in range(BATCH)]
    ts = []
    for _ in range(max(5, reps // BATCH)):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); run(); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b) / BATCH)
    ts.sort()
    return ts[len(ts) // 2]

def copy_bw(nbytes=1 << 30):
    x = torch.empty(nbytes, dtype=torch.uint8, device="cuda"); y = torch.empty_like(x)
    ms = timeit(lambda i: y.copy_(x), 1, 40, graph=False)
    return 2 * nbytes / (ms * 1e-3) / 1e9

def gemm_peers(out, quick):
    reps = 10 if quick else 30
    shapes = [(4096, 4096, 4096), (8192, 8192, 8192), (16, 8192, 8192)]
    cases = [(m, n, k, d) for (m, n, k) in shapes for d in ("bf16", "f16")] + [(4096, 4096, 4096, d) for d in ("bf16_bT", "bf16_aT", "tf32", "f32")]
    if "--gemm-shape" in sys.argv:  # one shape, `--dtypes` (as bench's flags)
        m, n, k = map(int, sys.argv[sys.argv.index("--gemm-shape") + 1].split("x"))
        ds = sys.argv[sys.argv.index("--dtypes") + 1].split(",") if "--dtypes" in sys.argv else ["bf16", "f16"]
        cases = [(m, n, k, d) for d in ds]
    print(f"torch {torch.__version__}  device: {torch.cuda.get_device_name()}  cuBLAS via torch.matmul")
    res = []
    for (m, n, k, d) in cases:
        ms, tf = time_matmul(m, n, k, d, reps)
        res.append(dict(impl="cublas", kernel="gemm", dtype=d, m=m, n=n, k=k, ms=ms, tflops=tf))
        print(f"cublas {d:<5} {m}x{n}x{k:<6} {ms*1e3:10.1f} us {tf:8.1f} TFLOP/s", flush=True)
    if out:
        with open(out, "w") as fh:
            for x in res:
                fh.write(json.dumps(x) + "\n")

def time_matmul(m, n, k, d, reps, graph=True):
    """(ms per call, TFLOP/s) of torch.matmul on case `d` (bench's dtype
    names: `_bT` / `_aT` a column-major B / A; TF32 allowed for `tf32`)."""
    dt = {"bf16": torch.bfloat16, "bf16_bT": torch.bfloat16, "bf16_aT": torch.bfloat16, "f16": torch.float16}.get(d, torch.float32)
    torch.backends.cuda.matmul.allow_tf32 = d == "tf32"
    a = torch.randn(m, k, device="cuda", dtype=dt); b = torch.randn(k, n, device="cuda", dtype=dt)
    if d.endswith("_bT"):  # B column-major: a linear layer's x·Wᵀ
        b = torch.randn(n, k, device="cuda", dtype=dt).t()
    if d.endswith("_aT"):  # A column-major (a transposed activation)
        a = torch.randn(k, m, device="cuda", dtype=dt).t()
    c = torch.empty(m, n, device="cuda", dtype=dt)
    ms = timeit(lambda i: torch.matmul(a, b, out=c), 1, reps, graph=graph)
    torch.backends.cuda.matmul.allow_tf32 = False
    return ms, 2 * m * n * k / (ms * 1e-3) / 1e12

def gemm_decode():
    m, n, k = 16, 8192, 8192
    for d in ("bf16", "f16"):
        for graph in (True, False):
            ms, tf = time_matmul(m, n, k, d, 100, graph)
            how = "graph" if graph else "back-to-back"
            print(f"cublas {d:<5} {m}x{n}x{k:<6} {ms*1e3:10.1f} us {tf:8.1f} TFLOP/s  ({how})", flush=True)

def attention_peers():
    import triton
    import triton.language as tl
    from torch.nn.attention import sdpa_kernel, SDPBackend

    @triton.jit
    def attn_fwd(Q, K, V, O, N, qk_scale, BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr, CAUSAL: tl.constexpr):
        start = tl.program_id(0) * BM
        head = tl.program_id(1).to(tl.int64) * N * D
        rows = start + tl.arange(0, BM)
        dims = tl.arange(0, D)
        q = tl.load(Q + head + rows[:, None] * D + dims[None, :], mask=rows[:, None] < N, other=0.0)
        m_i = tl.full([BM], float("-inf"), tl.float32)
        l_i = tl.zeros([BM], tl.float32)
        acc = tl.zeros([BM, D], tl.float32)
        hi = N
        if CAUSAL:
            hi = tl.minimum(N, start + BM)
        for j in range(0, hi, BN):
            cols = j + tl.arange(0, BN)
            kt = tl.load(K + head + cols[None, :] * D + dims[:, None], mask=cols[None, :] < N, other=0.0)
            s = tl.dot(q, kt) * qk_scale
            s = tl.where(cols[None, :] < N, s, float("-inf"))
            if CAUSAL:
                s = tl.where(rows[:, None] >= cols[None, :], s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            p = tl.math.exp2(s - m_new[:, None])
            alpha = tl.math.exp2(m_i - m_new)
            l_i = l_i * alpha + tl.sum(p, 1)
            v = tl.load(V + head + cols[:, None] * D + dims[None, :], mask=cols[:, None] < N, other=0.0)
            acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
            m_i = m_new
        out = acc / l_i[:, None]
        tl.store(O + head + rows[:, None] * D + dims[None, :], out.to(O.dtype.element_ty), mask=rows[:, None] < N)

    shapes = [(4, 32, 4096, 128), (4, 32, 4096, 64)]
    if "--attn-shapes" in sys.argv:
        shapes = [tuple(int(v) for v in s.split(":")) for s in sys.argv[sys.argv.index("--attn-shapes") + 1].split(",")]
    print(f"torch {torch.__version__}  triton {triton.__version__}  device: {torch.cuda.get_device_name()}")
    backends = [("sdpa-cudnn", SDPBackend.CUDNN_ATTENTION), ("sdpa-flash2", SDPBackend.FLASH_ATTENTION), ("sdpa-efficient", SDPBackend.EFFICIENT_ATTENTION)]
    configs = [(128, 64, 4, 3), (128, 64, 8, 3), (128, 64, 4, 4), (128, 128, 8, 2), (128, 128, 8, 3), (128, 128, 4, 3), (128, 32, 4, 3), (64, 64, 4, 3)]
    for (b, h, s, d) in shapes:
        for dt, dname in ((torch.bfloat16, "bf16"), (torch.float16, "f16")):
            q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=dt) for _ in range(3))
            for causal in (False, True):
                flops = 4 * b * h * s * s * d * (0.5 if causal else 1.0)
                ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
                tag = f"{dname:<5} b{b} h{h} s{s} d{d} causal={int(causal)}"
                for name, be in backends:
                    try:
                        with sdpa_kernel(be):
                            f = lambda i: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                            out = f(0)
                            ms = timeit(f, 1, 30)
                        err = (out.float() - ref).abs().max().item()
                        print(f"{name:<15} {tag}  {ms*1e3:9.1f} us {flops/(ms*1e-3)/1e12:7.1f} TFLOP/s  err {err:.1e}", flush=True)
                    except Exception as e:
                        print(f"{name:<15} {tag}  unavailable: {type(e).__name__}: {str(e)[:80]}")
                o = torch.empty_like(q)
                qk_scale = (d ** -0.5) * 1.4426950408889634
                best = None
                for (bm, bn, w, st) in configs:
                    grid = (triton.cdiv(s, bm), b * h)
                    f = lambda i: attn_fwd[grid](q, k, v, o, s, qk_scale, BM=bm, BN=bn, D=d, CAUSAL=causal, num_warps=w, num_stages=st)
                    try:
                        f(0)
                        torch.cuda.synchronize()
                        err = (o.float() - ref).abs().max().item()
                        if not err < 5e-2:
                            print(f"triton-fa2 {tag} {bm}x{bn} w{w} s{st}: wrong (err {err:.1e})")
                            continue
                        ms = timeit(f, 1, 10)
                    except Exception as e:  # out of shared memory etc.
                        continue
                    if best is None or ms < best[0]:
                        best = (ms, (bm, bn, w, st), err)
                if best:
                    ms, c, err = best
                    print(f"{'triton-fa2':<15} {tag}  {ms*1e3:9.1f} us {flops/(ms*1e-3)/1e12:7.1f} TFLOP/s  err {err:.1e}  (BM {c[0]} BN {c[1]} warps {c[2]} stages {c[3]})", flush=True)
    # GQA (`--attn-group G`: K/V with H/G heads), SDPA's backends with
    # enable_gqa (no copies), bf16, [b, h, s, d]
    g = int(sys.argv[sys.argv.index("--attn-group") + 1]) if "--attn-group" in sys.argv else 0
    for (b, h, s, d) in (shapes if g > 1 else []):
        dt = torch.bfloat16
        q = torch.randn(b, h, s, d, device="cuda", dtype=dt)
        k, v = (torch.randn(b, h // g, s, d, device="cuda", dtype=dt) for _ in range(2))
        for causal in (False, True):
            flops = 4 * b * h * s * s * d * (0.5 if causal else 1.0)
            tag = f"bf16  b{b} h{h}/{h // g} s{s} d{d} causal={int(causal)}"
            for name, be in backends:
                try:
                    with sdpa_kernel(be):
                        f = lambda i: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
                        f(0)
                        ms = timeit(f, 1, 30)
                    print(f"{name + '-gqa':<15} {tag}  {ms*1e3:9.1f} us {flops/(ms*1e-3)/1e12:7.1f} TFLOP/s", flush=True)
                except Exception as e:
                    print(f"{name + '-gqa':<15} {tag}  unavailable: {type(e).__name__}: {str(e)[:80]}")

def attention_backward_peers():
    """Attention backward (`--attn-backward [--attn-shapes B:H:S:D,..]`):
    dQ, dK, dV of SDPA with each backend forced (autograd, the backward
    alone timed: `torch.autograd.grad` on a kept graph) and a Triton
    FlashAttention-2 backward of the algorithm the library writes in the
    DSL (delta pre-pass; dK/dV per key block looping over query blocks,
    transposed products; dQ in a second pass), each loop tuned over a small
    grid; TFLOP/s = 2.5 × 4·b·h·s²·d, halved for causal. Error: max |got −
    want| / (1 + max |want|) per gradient against f32 math on batch entry 0."""
    import triton
    import triton.language as tl
    from torch.nn.attention import sdpa_kernel, SDPBackend

    @triton.jit
    def bwd_pre(O, DO, Delta, N, D: tl.constexpr, BM: tl.constexpr):
        rows = tl.program_id(0) * BM + tl.arange(0, BM)
        bh = tl.program_id(1).to(tl.int64)
        dims = tl.arange(0, D)
        at = bh * N * D + rows[:, None] * D + dims[None, :]
        o = tl.load(O + at, mask=rows[:, None] < N, other=0.0).to(tl.float32)
        do = tl.load(DO + at, mask=rows[:, None] < N, other=0.0).to(tl.float32)
        tl.store(Delta + bh * N + rows, tl.sum(o * do, 1), mask=rows < N)

    @triton.jit
    def bwd_dkdv(Q, K, V, DO, L, Delta, DK, DV, N, qk_scale, scale, BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr, CAUSAL: tl.constexpr):
        n0 = tl.program_id(0) * BN
        bh = tl.program_id(1).to(tl.int64)
        head = bh * N * D
        keys = n0 + tl.arange(0, BN)
        dims = tl.arange(0, D)
        k = tl.load(K + head + keys[:, None] * D + dims[None, :], mask=keys[:, None] < N, other=0.0)
        v = tl.load(V + head + keys[:, None] * D + dims[None, :], mask=keys[:, None] < N, other=0.0)
        dk = tl.zeros([BN, D], tl.float32)
        dv = tl.zeros([BN, D], tl.float32)
        lo = 0
        if CAUSAL:
            lo = (n0 // BM) * BM
        for i in range(lo, N, BM):
            rows = i + tl.arange(0, BM)
            qt = tl.load(Q + head + rows[None, :] * D + dims[:, None], mask=rows[None, :] < N, other=0.0)
            l2 = tl.load(L + bh * N + rows, mask=rows < N, other=float("inf")) * 1.4426950408889634
            st = tl.dot(k, qt) * qk_scale
            if CAUSAL:
                st = tl.where(keys[:, None] <= rows[None, :], st, float("-inf"))
            pt = tl.math.exp2(st - l2[None, :])
            do = tl.load(DO + head + rows[:, None] * D + dims[None, :], mask=rows[:, None] < N, other=0.0)
            dv += tl.dot(pt.to(do.dtype), do)
            dpt = tl.dot(v, tl.trans(do))
            dl = tl.load(Delta + bh * N + rows, mask=rows < N, other=0.0)
            dst = pt * (dpt - dl[None, :])
            dk += tl.dot(dst.to(qt.dtype), tl.trans(qt))
        at = head + keys[:, None] * D + dims[None, :]
        tl.store(DK + at, (dk * scale).to(DK.dtype.element_ty), mask=keys[:, None] < N)
        tl.store(DV + at, dv.to(DV.dtype.element_ty), mask=keys[:, None] < N)

    @triton.jit
    def bwd_dq(Q, K, V, DO, L, Delta, DQ, N, qk_scale, scale, BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr, CAUSAL: tl.constexpr):
        start = tl.program_id(0) * BM
        bh = tl.program_id(1).to(tl.int64)
        head = bh * N * D
        rows = start + tl.arange(0, BM)
        dims = tl.arange(0, D)
        q = tl.load(Q + head + rows[:, None] * D + dims[None, :], mask=rows[:, None] < N, other=0.0)
        do = tl.load(DO + head + rows[:, None] * D + dims[None, :], mask=rows[:, None] < N, other=0.0)
        l2 = tl.load(L + bh * N + rows, mask=rows < N, other=float("inf")) * 1.4426950408889634
        dl = tl.load(Delta + bh * N + rows, mask=rows < N, other=0.0)
        dq = tl.zeros([BM, D], tl.float32)
        hi = N
        if CAUSAL:
            hi = tl.minimum(N, start + BM)
        for j in range(0, hi, BN):
            cols = j + tl.arange(0, BN)
            kt = tl.load(K + head + cols[None, :] * D + dims[:, None], mask=cols[None, :] < N, other=0.0)
            vt = tl.load(V + head + cols[None, :] * D + dims[:, None], mask=cols[None, :] < N, other=0.0)
            s = tl.dot(q, kt) * qk_scale
            s = tl.where(cols[None, :] < N, s, float("-inf"))
            if CAUSAL:
                s = tl.where(rows[:, None] >= cols[None, :], s, float("-inf"))
            p = tl.math.exp2(s - l2[:, None])
            dp = tl.dot(do, vt)
            ds = p * (dp - dl[:, None])
            dq += tl.dot(ds.to(kt.dtype), tl.trans(kt))
        tl.store(DQ + head + rows[:, None] * D + dims[None, :], (dq * scale).to(DQ.dtype.element_ty), mask=rows[:, None] < N)

    shapes = [(4, 32, 4096, 128), (4, 32, 4096, 64)]
    if "--attn-shapes" in sys.argv:
        shapes = [tuple(int(v) for v in s.split(":")) for s in sys.argv[sys.argv.index("--attn-shapes") + 1].split(",")]
    print(f"torch {torch.__version__}  triton {triton.__version__}  device: {torch.cuda.get_device_name()}")
    backends = [("sdpa-cudnn", SDPBackend.CUDNN_ATTENTION), ("sdpa-flash2", SDPBackend.FLASH_ATTENTION), ("sdpa-efficient", SDPBackend.EFFICIENT_ATTENTION)]
    dkdv_cfgs = [(32, 64, 4, 2), (64, 64, 4, 2), (32, 128, 8, 2), (64, 128, 8, 2), (32, 128, 4, 3), (16, 128, 4, 3), (32, 64, 4, 3)]
    dq_cfgs = [(64, 64, 4, 2), (128, 64, 8, 2), (64, 32, 4, 3), (128, 32, 8, 2), (128, 128, 8, 2), (64, 64, 4, 3)]

    def err_of(got, want):
        return max(((g.float() - w).abs().max() / (1 + w.abs().max())).item() for g, w in zip(got, want))

    for (b, h, s, d) in shapes:
        for dt, dname in ((torch.bfloat16, "bf16"), (torch.float16, "f16")):
            q, k, v, dout = (torch.randn(b, h, s, d, device="cuda", dtype=dt) for _ in range(4))
            scale = d ** -0.5
            for causal in (False, True):
                flops = 2.5 * 4 * b * h * s * s * d * (0.5 if causal else 1.0)
                tag = f"{dname:<5} b{b} h{h} s{s} d{d} causal={int(causal)}"
                q0, k0, v0 = (x[:1].float().requires_grad_() for x in (q, k, v))
                with sdpa_kernel(SDPBackend.MATH):
                    o0 = F.scaled_dot_product_attention(q0, k0, v0, is_causal=causal)
                want = torch.autograd.grad(o0, (q0, k0, v0), dout[:1].float())
                del q0, k0, v0, o0
                for name, be in backends:
                    try:
                        qq, kk, vv = (x.detach().clone().requires_grad_() for x in (q, k, v))
                        with sdpa_kernel(be):
                            out = F.scaled_dot_product_attention(qq, kk, vv, is_causal=causal)
                        f = lambda i: torch.autograd.grad(out, (qq, kk, vv), dout, retain_graph=True)
                        got = f(0)
                        err = err_of([g[:1] for g in got], want)
                        ms = timeit(f, 1, 10, graph=False)
                        print(f"{name + '-bwd':<18} {tag}  {ms*1e3:9.1f} us {flops/(ms*1e-3)/1e12:7.1f} TFLOP/s  err {err:.1e}", flush=True)
                        del qq, kk, vv, out, got
                    except Exception as e:
                        print(f"{name + '-bwd':<18} {tag}  unavailable: {type(e).__name__}: {str(e)[:80]}")
                # Triton, same algorithm: the log-sum-exp from torch (not timed)
                lse = torch.empty(b, h, s, device="cuda", dtype=torch.float32)
                for bi in range(b):
                    logits = (q[bi].float() @ k[bi].float().transpose(-1, -2)) * scale
                    if causal:
                        logits.masked_fill_(torch.ones(s, s, device="cuda", dtype=torch.bool).triu(1), float("-inf"))
                    lse[bi] = torch.logsumexp(logits, -1)
                    del logits
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                delta = torch.empty_like(lse)
                dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
                qk_scale = scale * 1.4426950408889634
                pre = lambda i: bwd_pre[(triton.cdiv(s, 64), b * h)](o, dout, delta, s, D=d, BM=64)
                pre(0)
                ms_pre = timeit(pre, 1, 10, graph=False)
                best = {}
                for which, cfgs in (("dkdv", dkdv_cfgs), ("dq", dq_cfgs)):
                    for (bm, bn, w, st) in cfgs:
                        if which == "dkdv":
                            f = lambda i: bwd_dkdv[(triton.cdiv(s, bn), b * h)](q, k, v, dout, lse, delta, dk, dv, s, qk_scale, scale, BM=bm, BN=bn, D=d, CAUSAL=causal, num_warps=w, num_stages=st)
                        else:
                            f = lambda i: bwd_dq[(triton.cdiv(s, bm), b * h)](q, k, v, dout, lse, delta, dq, s, qk_scale, scale, BM=bm, BN=bn, D=d, CAUSAL=causal, num_warps=w, num_stages=st)
                        try:
                            f(0)
                            torch.cuda.synchronize()
                            got = [dk[:1], dv[:1]] if which == "dkdv" else [dq[:1]]
                            e = err_of(got, want[1:] if which == "dkdv" else want[:1])
                            if not e < 5e-2:
                                print(f"triton-fa2-bwd {which} {tag} {bm}x{bn} w{w} s{st}: wrong (err {e:.1e})")
                                continue
                            ms = timeit(f, 1, 10, graph=False)
                        except Exception:
                            continue
                        if which not in best or ms < best[which][0]:
                            best[which] = (ms, (bm, bn, w, st), e)
                if len(best) == 2:
                    ms = ms_pre + best["dkdv"][0] + best["dq"][0]
                    err = max(best["dkdv"][2], best["dq"][2])
                    print(f"{'triton-fa2-bwd':<18} {tag}  {ms*1e3:9.1f} us {flops/(ms*1e-3)/1e12:7.1f} TFLOP/s  err {err:.1e}  (dkdv {best['dkdv'][1]} {best['dkdv'][0]*1e3:.0f} us, dq {best['dq'][1]} {best['dq'][0]*1e3:.0f} us, pre {ms_pre*1e3:.0f} us)", flush=True)
                del lse, o, delta, dq, dk, dv

def decode_peers():
    """Decode attention: SDPA with each backend forced on q [b, h, sq, d]
    against a K/V cache [b, hk, sk, d] (`enable_gqa` when hk < h); µs and
    the K/V read's GB/s. `--decode-shapes B:H:HK:SQ:SK:D,..`."""
    from torch.nn.attention import sdpa_kernel, SDPBackend
    shapes = [(32, 32, 32, 1, 8192, 128), (32, 32, 8, 1, 8192, 128), (32, 32, 32, 8, 8192, 128), (32, 32, 8, 8, 8192, 128)]
    if "--decode-shapes" in sys.argv:
        shapes = [tuple(int(v) for v in s.split(":")) for s in sys.argv[sys.argv.index("--decode-shapes") + 1].split(",")]
    print(f"torch {torch.__version__}  device: {torch.cuda.get_device_name()}  copy: {copy_bw():.0f} GB/s")
    backends = [("sdpa-cudnn", SDPBackend.CUDNN_ATTENTION), ("sdpa-flash2", SDPBackend.FLASH_ATTENTION), ("sdpa-efficient", SDPBackend.EFFICIENT_ATTENTION), ("sdpa-math", SDPBackend.MATH)]
    for (b, h, hk, sq, sk, d) in shapes:
        for dt, dname in ((torch.bfloat16, "bf16"), (torch.float16, "f16")):
            q = torch.randn(b, h, sq, d, device="cuda", dtype=dt)
            k, v = (torch.randn(b, hk, sk, d, device="cuda", dtype=dt) for _ in range(2))
            kv = 2 * k.numel() * k.element_size()
            tag = f"{dname:<5} b{b} h{h}/{hk} q{sq} kv{sk} d{d}"
            for name, be in backends:
                try:
                    with sdpa_kernel(be):
                        f = lambda i: F.scaled_dot_product_attention(q, k, v, enable_gqa=hk < h)
                        f(0)
                        ms = timeit(f, 1, 50)
                    print(f"{name:<15} {tag}  {ms*1e3:9.1f} us {kv/(ms*1e-3)/1e9:7.0f} GB/s KV", flush=True)
                except Exception as e:
                    print(f"{name:<15} {tag}  unavailable: {type(e).__name__}: {str(e)[:80]}")

def triton_w4a16(x, n, k, group):
    """The same algorithm as `dequant-user`, written the GPTQ-Triton way:
    weights packed 8 per int32 along K ([K/8, N]), a bf16 scale and a
    packed 4-bit zero point per group row and column; each K step unpacks
    with shift and mask, dequantizes (q - z)*s to bf16 and feeds tl.dot.
    Returns the best time over a few configurations (ms) and that config,
    after checking the output of each against torch on the dequantized
    weights."""
    import triton
    import triton.language as tl

    @triton.jit
    def w4a16(X, W, S, Z, O, M, N, K, G: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        rm = tl.program_id(0) * BM + tl.arange(0, BM)
        rn = tl.program_id(1) * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros([BM, BN], tl.float32)
        for k0 in range(0, K, BK):
            kk = k0 + rk
            a = tl.load(X + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
            words = tl.load(W + (kk[:, None] // 8) * N + rn[None, :], mask=(kk[:, None] < K) & (rn[None, :] < N), other=0)
            q = (words >> ((kk[:, None] % 8) * 4)) & 15
            g = kk[:, None] // G
            s = tl.load(S + g * N + rn[None, :], mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0).to(tl.float32)
            zw = tl.load(Z + g * (N // 8) + (rn[None, :] // 8), mask=(kk[:, None] < K) & (rn[None, :] < N), other=0)
            z = (zw >> ((rn[None, :] % 8) * 4)) & 15
            b = ((q - z).to(tl.float32) * s).to(tl.bfloat16)
            acc = tl.dot(a, b, acc)
        tl.store(O + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16), mask=(rm[:, None] < M) & (rn[None, :] < N))

    m = x.shape[0]
    q = torch.randint(0, 16, (k, n), dtype=torch.int32, device="cuda")
    zq = torch.randint(0, 16, (k // group, n), dtype=torch.int32, device="cuda")
    sc = (torch.rand(k // group, n, device="cuda") * 0.015 + 0.005).to(torch.bfloat16)
    shifts = (torch.arange(8, device="cuda", dtype=torch.int32) * 4)
    w = (q.view(k // 8, 8, n) << shifts[None, :, None]).sum(1, dtype=torch.int64).to(torch.int64)
    w = torch.where(w >= 2**31, w - 2**32, w).to(torch.int32).contiguous()
    z = (zq.view(k // group, n // 8, 8) << shifts[None, None, :]).sum(2, dtype=torch.int64)
    z = torch.where(z >= 2**31, z - 2**32, z).to(torch.int32).contiguous()
    deq = ((q - zq.repeat_interleave(group, 0)).float() * sc.float().repeat_interleave(group, 0)).to(torch.bfloat16)
    want = (x.double() @ deq.double())
    o = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    best = None
    for (bm, bn, bk, nw, ns) in [(16, 64, 128, 4, 3), (16, 128, 128, 4, 3), (16, 32, 256, 4, 3), (16, 64, 64, 4, 4), (64, 64, 128, 4, 3)]:
        if bm > 16 and m <= 16:
            continue
        grid = (triton.cdiv(m, bm), triton.cdiv(n, bn))
        f = lambda i: w4a16[grid](x, w, sc, z, o, m, n, k, G=group, BM=bm, BN=bn, BK=bk, num_warps=nw, num_stages=ns)
        try:
            o.fill_(float("nan")); f(0); torch.cuda.synchronize()
            err = ((o.double() - want).abs() / (want.abs() + 0.1 * want.pow(2).mean().sqrt())).max().item()
            if not err <= 1e-2:
                print(f"  triton-w4a16 {bm}x{bn}x{bk} w{nw} s{ns}: wrong, err {err:.2e}")
                continue
            ms = timeit(f, 1, 100)
        except Exception as e:
            print(f"  triton-w4a16 {bm}x{bn}x{bk} w{nw} s{ns}: {type(e).__name__}: {str(e)[:120]}")
            continue
        print(f"  triton-w4a16 {m}x{n}x{k} {bm}x{bn}x{bk} w{nw} s{ns}: {ms*1e3:8.1f} us  err {err:.1e}")
        if best is None or ms < best[0]:
            best = (ms, f"{bm}x{bn}x{bk} w{nw} s{ns}")
    if best is None:
        raise RuntimeError("no configuration ran")
    return best

def dequant_peers():
    shapes = [(1, 8192, 8192), (16, 8192, 8192), (64, 8192, 8192), (1, 4096, 14336)]
    if "--dq-shapes" in sys.argv:
        shapes = [tuple(int(v) for v in s.split("x")) for s in sys.argv[sys.argv.index("--dq-shapes") + 1].split(",")]
    group = 128
    print(f"torch {torch.__version__}  device: {torch.cuda.get_device_name()}  W4A16 group {group}")
    for (m, n, k) in shapes:
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        ms_dense = timeit(lambda i: torch.matmul(x, w.t()), 1, 100)
        print(f"{'cublas-bf16':<12} {m}x{n}x{k}  {ms_dense*1e3:8.1f} us", flush=True)
        try:
            ms_t, cfg_t = triton_w4a16(x, n, k, group)
            print(f"{'triton-w4a16':<12} {m}x{n}x{k}  {ms_t*1e3:8.1f} us  {ms_dense/ms_t:5.2f}x dense  (best of the configs: {cfg_t})", flush=True)
        except Exception as e:
            print(f"{'triton-w4a16':<12} {m}x{n}x{k}  unavailable: {type(e).__name__}: {str(e)[:200]}")
        try:
            from gemlite.helper import A16Wn
            wq = torch.randint(0, 16, (n, k), dtype=torch.uint8, device="cuda")
            gs = (torch.rand(n, k // group, device="cuda") * 0.015 + 0.005).to(torch.bfloat16)
            gz = torch.randint(0, 16, (n, k // group), device="cuda").to(torch.bfloat16)
            layer = A16Wn(device="cuda", dtype=torch.bfloat16).from_weights(wq, gs, gz, W_nbits=4, group_size=group)
            layer(x); torch.cuda.synchronize()
            ms = timeit(lambda i: layer(x), 1, 100)
            print(f"{'gemlite':<12} {m}x{n}x{k}  {ms*1e3:8.1f} us  {ms_dense/ms:5.2f}x dense", flush=True)
        except Exception as e:
            print(f"{'gemlite':<12} {m}x{n}x{k}  unavailable: {type(e).__name__}: {str(e)[:160]}")
        try:
            q = torch.randint(0, 16, (n, k), dtype=torch.int32, device="cuda")
            q8 = (q[:, ::2] << 4 | q[:, 1::2]).to(torch.uint8)
            packed = torch.ops.aten._convert_weight_to_int4pack(q8, 8)
            sz = torch.rand(k // group, n, 2, device="cuda", dtype=torch.bfloat16)
            f = lambda i: torch.ops.aten._weight_int4pack_mm(x, packed, group, sz)
            f(0)
            ms = timeit(f, 1, 100)
            print(f"{'tinygemm':<12} {m}x{n}x{k}  {ms*1e3:8.1f} us  {ms_dense/ms:5.2f}x dense", flush=True)
        except Exception as e:
            print(f"{'tinygemm':<12} {m}x{n}x{k}  unavailable: {type(e).__name__}: {str(e)[:100]}")

def w8a8_peers():
    """W8A8 peers: cuBLAS bf16 (x·Wᵀ, W [n, k]) and torch._int_mm (int8 ×
    int8 → int32, B column-major: the same [n, k] weights transposed), each
    on the same shapes; TOPS = 2·m·n·k / time."""
    shapes = [(4096, 4096, 4096), (8192, 8192, 8192)]
    if "--w8-shapes" in sys.argv:
        shapes = [tuple(int(v) for v in s.split("x")) for s in sys.argv[sys.argv.index("--w8-shapes") + 1].split(",")]
    print(f"torch {torch.__version__}  device: {torch.cuda.get_device_name()}  W8A8")
    for (m, n, k) in shapes:
        ops = 2 * m * n * k
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        ms_dense = timeit(lambda i: torch.matmul(x, w.t()), 1, 100)
        print(f"{'cublas-bf16':<12} {m}x{n}x{k}  {ms_dense*1e3:8.1f} us  {ops/(ms_dense*1e-3)/1e12:7.1f} TFLOP/s", flush=True)
        try:
            a = torch.randint(-128, 128, (m, k), dtype=torch.int8, device="cuda")
            b = torch.randint(-128, 128, (n, k), dtype=torch.int8, device="cuda").t()
            ms = timeit(lambda i: torch._int_mm(a, b), 1, 100)
            print(f"{'int_mm':<12} {m}x{n}x{k}  {ms*1e3:8.1f} us  {ops/(ms*1e-3)/1e12:7.1f} TOPS  {ms_dense/ms:5.2f}x bf16", flush=True)
        except Exception as e:
            print(f"{'int_mm':<12} {m}x{n}x{k}  unavailable: {type(e).__name__}: {str(e)[:160]}")

def fp8_peers():
    """FP8 peers: cuBLAS bf16 (x·Wᵀ) and torch._scaled_mm (e4m3, row-wise
    scales, bf16 out; with and without fast accumulation), same shapes."""
    shapes = [(4096, 4096, 4096), (8192, 8192, 8192)]
    if "--w8-shapes" in sys.argv:
        shapes = [tuple(int(v) for v in s.split("x")) for s in sys.argv[sys.argv.index("--w8-shapes") + 1].split(",")]
    print(f"torch {torch.__version__}  device: {torch.cuda.get_device_name()}  FP8")
    for (m, n, k) in shapes:
        ops = 2 * m * n * k
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        ms_dense = timeit(lambda i: torch.matmul(x, w.t()), 1, 100)
        print(f"{'cublas-bf16':<12} {m}x{n}x{k}  {ms_dense*1e3:8.1f} us  {ops/(ms_dense*1e-3)/1e12:7.1f} TFLOP/s", flush=True)
        a = x.to(torch.float8_e4m3fn)
        b = w.to(torch.float8_e4m3fn).t()
        sa = torch.rand(m, 1, device="cuda", dtype=torch.float32) + 0.5
        sb = torch.rand(1, n, device="cuda", dtype=torch.float32) + 0.5
        for fast in (True, False):
            name = "scaled_mm" + ("-fast" if fast else "")
            try:
                f = lambda i: torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, use_fast_accum=fast)
                f(0)
                ms = timeit(f, 1, 100)
                print(f"{name:<14} {m}x{n}x{k}  {ms*1e3:8.1f} us  {ops/(ms*1e-3)/1e12:7.1f} TFLOP/s  {ms_dense/ms:5.2f}x bf16", flush=True)
            except Exception as e:
                print(f"{name:<14} {m}x{n}x{k}  unavailable: {type(e).__name__}: {str(e)[:160]}")

def suite_peers():
    """`--suite`: the Triton twins of `user-suite` (issue 20's generality
    suite): the same algorithm, shapes and tiles as the DSL kernels, each
    checked against torch, timed as the other peers (CUDA graph of 10
    calls, median). Prints `suite NAME SHAPE triton US`."""
    import triton
    import triton.language as tl

    @triton.jit
    def silu_scale3d(X, S, Y, NB, NH, ND, TB: tl.constexpr, TH: tl.constexpr, TD: tl.constexpr):
        b = tl.program_id(0) * TB + tl.arange(0, TB)
        h = tl.program_id(1) * TH + tl.arange(0, TH)
        d = tl.program_id(2) * TD + tl.arange(0, TD)
        b3 = b[:, None, None]; h3 = h[None, :, None]; d3 = d[None, None, :]
        m = (b3 < NB) & (h3 < NH) & (d3 < ND)
        offs = (b3.to(tl.int64) * NH + h3) * ND + d3
        v = tl.load(X + offs, mask=m, other=0.0)
        s = tl.load(S + h[:, None].to(tl.int64) * ND + d[None, :], mask=(h[:, None] < NH) & (d[None, :] < ND), other=0.0)
        tl.store(Y + offs, v * tl.sigmoid(v) * s[None, :, :], mask=m)

    @triton.jit
    def rope(X, C, S, Y, NTOK, TT: tl.constexpr, H: tl.constexpr, HALF: tl.constexpr):
        t = tl.program_id(0) * TT + tl.arange(0, TT)
        t3 = t[:, None, None]; h3 = tl.arange(0, H)[None, :, None]; j3 = tl.arange(0, HALF)[None, None, :]
        m = (t3 < NTOK) & (h3 < H) & (j3 < HALF)
        at = t3.to(tl.int64) * (H * 2 * HALF) + h3 * (2 * HALF) + j3
        x1 = tl.load(X + at, mask=m, other=0.0)
        x2 = tl.load(X + at + HALF, mask=m, other=0.0)
        cs = t3.to(tl.int64) * HALF + j3
        c = tl.load(C + cs, mask=t3 < NTOK, other=0.0)
        sn = tl.load(S + cs, mask=t3 < NTOK, other=0.0)
        tl.store(Y + at, x1 * c - x2 * sn, mask=m)
        tl.store(Y + at + HALF, x2 * c + x1 * sn, mask=m)

    @triton.jit
    def row_cumsum(X, Y, N, B: tl.constexpr):
        row = tl.program_id(0).to(tl.int64) * N
        c = tl.arange(0, B)
        v = tl.load(X + row + c, mask=c < N, other=0.0)
        tl.store(Y + row + c, tl.cumsum(v, 0), mask=c < N)

    @triton.jit
    def row_topk(X, V, I, N, B: tl.constexpr, K: tl.constexpr):
        r = tl.program_id(0)
        c = tl.arange(0, B)
        v = tl.load(X + r.to(tl.int64) * N + c, mask=c < N, other=float("-inf"))
        for i in range(K):
            best = tl.max(v, 0)
            at = tl.argmax(v, 0)
            tl.store(V + r * K + i, best)
            tl.store(I + r * K + i, at)
            v = tl.where(c == at, float("-inf"), v)

    @triton.jit
    def softmax_bwd(Yp, G, DX, N, B: tl.constexpr):
        row = tl.program_id(0).to(tl.int64) * N
        c = tl.arange(0, B)
        m = c < N
        y = tl.load(Yp + row + c, mask=m, other=0.0)
        g = tl.load(G + row + c, mask=m, other=0.0)
        dot = tl.sum(y * g, 0)
        tl.store(DX + row + c, y * (g - dot), mask=m)

    @triton.jit
    def embedding(T, IDX, O, NTOK, D, R: tl.constexpr, BD: tl.constexpr):
        t = tl.program_id(0) * R + tl.arange(0, R)
        cols = tl.program_id(1) * BD + tl.arange(0, BD)
        ok = t < NTOK
        rows = tl.load(IDX + t, mask=ok, other=0)
        m = ok[:, None] & (cols[None, :] < D)
        v = tl.load(T + rows[:, None].to(tl.int64) * D + cols[None, :], mask=m, other=0.0)
        tl.store(O + t[:, None].to(tl.int64) * D + cols[None, :], v, mask=m)

    @triton.jit
    def norm_matmul(X, G, W, Y, M, N, K, eps, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        rm = tl.program_id(0) * BM + tl.arange(0, BM)
        rn = tl.program_id(1) * BN + tl.arange(0, BN)
        m_ok = rm < M
        n_ok = rn < N
        xrow = X + rm[:, None].to(tl.int64) * K
        ss = tl.zeros([BM], tl.float32)
        for k0 in range(0, K, BK):
            rk = k0 + tl.arange(0, BK)
            xt = tl.load(xrow + rk[None, :], mask=m_ok[:, None] & (rk[None, :] < K), other=0.0).to(tl.float32)
            ss += tl.sum(xt * xt, 1)
        r = tl.rsqrt(ss / K + eps)
        acc = tl.zeros([BM, BN], tl.float32)
        for k0 in range(0, K, BK):
            rk = k0 + tl.arange(0, BK)
            k_ok = rk < K
            xt = tl.load(xrow + rk[None, :], mask=m_ok[:, None] & k_ok[None, :], other=0.0).to(tl.float32)
            gv = tl.load(G + rk, mask=k_ok, other=0.0).to(tl.float32)
            a = (xt * r[:, None] * gv[None, :]).to(tl.bfloat16)
            wt = tl.load(W + rk[:, None].to(tl.int64) * N + rn[None, :], mask=k_ok[:, None] & n_ok[None, :], other=0.0)
            acc = tl.dot(a, wt, acc)
        tl.store(Y + rm[:, None].to(tl.int64) * N + rn[None, :], acc.to(tl.bfloat16), mask=m_ok[:, None] & n_ok[None, :])

    @triton.jit
    def grouped_gemm(X, W, O, TG, TR, GE, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        t = tl.program_id(0)
        g = tl.load(TG + t)
        r0 = tl.load(TR + t)
        r_end = tl.load(GE + g)
        rm = r0 + tl.arange(0, BM)
        rn = tl.program_id(1) * BN + tl.arange(0, BN)
        m_ok = rm < r_end
        n_ok = rn < N
        wg = W + g.to(tl.int64) * K * N
        acc = tl.zeros([BM, BN], tl.float32)
        for k0 in range(0, K, BK):
            kk = k0 + tl.arange(0, BK)
            a = tl.load(X + rm[:, None].to(tl.int64) * K + kk[None, :], mask=m_ok[:, None] & (kk[None, :] < K), other=0.0)
            b = tl.load(wg + kk[:, None].to(tl.int64) * N + rn[None, :], mask=(kk[:, None] < K) & n_ok[None, :], other=0.0)
            acc = tl.dot(a, b, acc)
        tl.store(O + rm[:, None].to(tl.int64) * N + rn[None, :], acc.to(tl.bfloat16), mask=m_ok[:, None] & n_ok[None, :])

    @triton.jit
    def row_logsumexp(X, O, N, B: tl.constexpr):
        row = X + tl.program_id(0).to(tl.int64) * N
        mv = tl.full([B], -1.0e30, tl.float32)
        sv = tl.zeros([B], tl.float32)
        for c0 in range(0, N, B):
            c = c0 + tl.arange(0, B)
            v = tl.load(row + c, mask=c < N, other=float("-inf"))
            nm = tl.maximum(mv, v)
            sv = sv * tl.exp(mv - nm) + tl.exp(v - nm)
            mv = nm
        m = tl.max(mv, 0)
        tl.store(O + tl.program_id(0), m + tl.log(tl.sum(sv * tl.exp(mv - m), 0)))

    torch.manual_seed(0)
    f32 = dict(device="cuda", dtype=torch.float32)
    cdiv = triton.cdiv
    # (`--only NAME[,NAME..]`: time those kernels alone; the others still run once)
    only = next((sys.argv[i + 1].split(",") for i, a in enumerate(sys.argv[:-1]) if a == "--only"), None)
    def report(name, shape, fn, ok):
        if only is not None and name not in only:
            return
        ms = timeit(lambda i: fn(), 1, 50)
        print(f"suite {name:<14} {shape:<22} triton    {ms*1e3:9.2f} us{'' if ok else '  FAIL'}", flush=True)

    nb, nh, nd = 32, 512, 1000
    x = torch.randn(nb, nh, nd, **f32); s = torch.randn(nh, nd, **f32); y = torch.empty_like(x)
    fn = lambda: silu_scale3d[(cdiv(nb, 2), cdiv(nh, 4), cdiv(nd, 256))](x, s, y, nb, nh, nd, TB=2, TH=4, TD=256)
    fn(); report("silu_scale3d", f"{nb}x{nh}x{nd}", fn, torch.allclose(y, x * torch.sigmoid(x) * s, rtol=1e-5, atol=1e-6))
    del x, y

    ntok, H, HALF = 8192, 32, 64
    x = torch.randn(ntok, H, 2 * HALF, **f32); ang = torch.randn(ntok, HALF, **f32)
    c, sn = ang.cos(), ang.sin(); y = torch.empty_like(x)
    fn = lambda: rope[(cdiv(ntok, 2),)](x, c, sn, y, ntok, TT=2, H=H, HALF=HALF)
    fn()
    x1, x2 = x[..., :HALF], x[..., HALF:]
    want = torch.cat([x1 * c[:, None] - x2 * sn[:, None], x2 * c[:, None] + x1 * sn[:, None]], -1)
    report("rope", f"{ntok}x{H}x{2*HALF}", fn, torch.allclose(y, want, rtol=1e-5, atol=1e-5))
    del x, y, want

    rows, n = 16384, 1000
    x = torch.randn(rows, n, **f32); y = torch.empty_like(x)
    fn = lambda: row_cumsum[(rows,)](x, y, n, B=1024)
    fn(); report("row_cumsum", f"{rows}x{n}", fn, torch.allclose(y, x.double().cumsum(1).float(), rtol=1e-4, atol=1e-4))
    v = torch.empty(rows, 8, **f32); ix = torch.empty(rows, 8, device="cuda", dtype=torch.int32)
    fn = lambda: row_topk[(rows,)](x, v, ix, n, B=1024, K=8)
    fn(); tv, ti = x.topk(8, dim=1)
    report("row_topk", f"{rows}x{n}:k8", fn, torch.equal(v, tv) and torch.equal(ix.long(), ti))
    yv = torch.rand(rows, n, **f32) * (2.0 / n); g = torch.randn(rows, n, **f32); dx = torch.empty_like(g)
    fn = lambda: softmax_bwd[(rows,)](yv, g, dx, n, B=1024)
    fn(); report("softmax_bwd", f"{rows}x{n}", fn, torch.allclose(dx, yv * (g - (yv * g).sum(1, keepdim=True)), rtol=1e-4, atol=1e-6))
    del x, y, yv, g, dx

    vocab, d, ntok = 32000, 1000, 16384
    table = torch.randn(vocab, d, **f32); idx = torch.randint(0, vocab, (ntok,), device="cuda", dtype=torch.int32)
    out = torch.empty(ntok, d, **f32)
    fn = lambda: embedding[(cdiv(ntok, 4), cdiv(d, 1024))](table, idx, out, ntok, d, R=4, BD=1024)
    fn(); report("embedding", f"{ntok}x{d}:v{vocab}", fn, torch.equal(out, table[idx.long()]))
    del table, out

    groups, n, k, bm = 8, 2048, 2048, 128
    sizes = [1023, 257, 600, 1400, 333, 888, 1200, 511]  # as user-suite's
    tg, tr, ends, start = [], [], [], 0
    for gi, sz in enumerate(sizes):
        for r in range(start, start + sz, bm):
            tg.append(gi); tr.append(r)
        start += sz; ends.append(start)
    m = start
    xg = torch.randn(m, k, device="cuda", dtype=torch.bfloat16); wg = (torch.randn(groups, k, n, device="cuda") * 0.05).to(torch.bfloat16)
    o = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    TG, TR, GE = (torch.tensor(a, device="cuda", dtype=torch.int32) for a in (tg, tr, ends))
    fn = lambda: grouped_gemm[(len(tg), cdiv(n, 128))](xg, wg, o, TG, TR, GE, n, k, BM=128, BN=128, BK=64, num_warps=8, num_stages=3)
    fn()
    want = torch.cat([xg[(ends[i] - sizes[i]):ends[i]].float() @ wg[i].float() for i in range(groups)])
    report("grouped_gemm", f"g{groups}:m{m}x{n}x{k}", fn, torch.allclose(o.float(), want, rtol=2e-2, atol=2e-2))
    del xg, wg, o

    rows, n = 256, 131072
    x = torch.randn(rows, n, **f32) * 3; o = torch.empty(rows, **f32)
    fn = lambda: row_logsumexp[(rows,)](x, o, n, B=4096)
    fn(); report("row_logsumexp", f"{rows}x{n}", fn, torch.allclose(o, torch.logsumexp(x.double(), 1).float(), rtol=1e-5, atol=1e-5))
    del x, o

    m, n, k = 4096, 4096, 4096  # as user-suite's
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    g = (1.0 + 0.1 * torch.randn(k, device="cuda")).to(torch.bfloat16)
    w = (torch.randn(k, n, device="cuda") * 0.05).to(torch.bfloat16)
    y = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    fn = lambda: norm_matmul[(cdiv(m, 128), cdiv(n, 128))](x, g, w, y, m, n, k, 1e-6, BM=128, BN=128, BK=64, num_warps=8, num_stages=3)
    fn()
    xd = x.double()
    xn = xd * torch.rsqrt(xd.pow(2).mean(1, keepdim=True) + 1e-6) * g.double()
    want = xn @ w.double()
    # (user-suite's measure: the error relative to the element plus the
    # root of its products' squares — an absolute 2e-2 fails a few of the
    # 16 M elements near zero on rounding alone, ~5σ of a 4096-term sum)
    mag = (xn.pow(2) @ w.double().pow(2)).sqrt()
    report("norm_matmul", f"{m}x{n}x{k}", fn, ((y.double() - want).abs() / (want.abs() + mag)).max().item() <= 1e-2)

def main():
    quick = "--quick" in sys.argv
    if "--suite" in sys.argv:
        return suite_peers()
    if "--fp8" in sys.argv:
        return fp8_peers()
    if "--w8a8" in sys.argv:
        return w8a8_peers()
    if "--attn-backward" in sys.argv:
        return attention_backward_peers()
    if "--attention" in sys.argv:
        return attention_peers()
    if "--dequant" in sys.argv:
        return dequant_peers()
    if "--decode" in sys.argv:
        return decode_peers()
    if "--gemm-decode" in sys.argv:
        return gemm_decode()
    if "--gemm" in sys.argv:
        return gemm_peers(sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv else None, quick)
    out = sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv else None
    reps = 10 if quick else 50
    shapes = [(4096, 4096)] if quick else [(16384, 1024), (16384, 4096), (4096, 16384), (1024, 262144)]
    if "--shapes" in sys.argv:
        shapes = [tuple(int(v) for v in s.split("x")) for s in sys.argv[sys.argv.index("--shapes") + 1].split(",")]
    cbw = copy_bw()
    print(f"torch {torch.__version__}  device: {torch.cuda.get_device_name()}  copy: {cbw:.0f} GB/s")
    res = []
    fns = {
        "softmax": lambda x, w, b: torch.softmax(x, dim=-1),
        "layer_norm": lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b, 1e-5),
        "rms_norm": lambda x, w, b: F.rms_norm(x, (x.shape[-1],), w, 1e-6),
    }
    # Liger-Kernel (pure Triton; its wheel travels in .whl/, see gpu-run.sh):
    # the forward autograd functions, as its `liger_*` functional API calls them
    try:
        from liger_kernel.ops.softmax import LigerSoftmaxFunction
        from liger_kernel.ops.layer_norm import LigerLayerNormFunction
        from liger_kernel.ops.rms_norm import LigerRMSNormFunction
        import importlib.metadata as md
        liger = {
            "softmax": lambda x, w, b: LigerSoftmaxFunction.apply(x),
            "layer_norm": lambda x, w, b: LigerLayerNormFunction.apply(x, w, b, 1e-5),
            "rms_norm": lambda x, w, b: LigerRMSNormFunction.apply(x, w, 1e-6, 0.0, "llama", False),
        }
        print(f"liger-kernel {md.version('liger-kernel')}")
    except Exception as e:  # report, don't hide
        print(f"liger-kernel not available ({type(e).__name__}: {e}); its column stays empty")
        liger = {}
    for (r, c) in shapes:
        for kname, f in fns.items():
            for dt in (torch.float32, torch.bfloat16):
                es = torch.finfo(dt).bits // 8
                copies = max(1, min(8, ROTATE // (2 * r * c * es)))
                xs = [torch.rand(r, c, device="cuda", dtype=dt) * 8 - 4 for _ in range(copies)]
                w = torch.randn(c, device="cuda", dtype=dt); b = torch.randn(c, device="cuda", dtype=dt)
                for impl in ("eager", "compile", "liger"):
                    if impl == "liger" and kname not in liger:
                        continue
                    g = {"eager": f, "liger": liger.get(kname)}.get(impl) or torch.compile(f, dynamic=False)
                    try:
                        if impl == "liger":  # a peer that computes something else is no peer
                            want = f(xs[0].double(), w.double(), b.double())
                            err = ((g(xs[0], w, b).double() - want).abs().max() / want.abs().max().clamp(min=1e-30)).item()
                            if not err < (1e-2 if dt == torch.bfloat16 else 1e-4):
                                raise RuntimeError(f"max rel error {err:.2e} against f64")
                        ms = timeit(lambda i: g(xs[i], w, b), copies, reps)
                    except Exception as e:  # report, don't hide
                        print(f"{impl} {kname} {r}x{c} {dt}: {e}")
                        continue
                    gbs = 2 * r * c * es / (ms * 1e-3) / 1e9
                    d = "f32" if dt == torch.float32 else "bf16"
                    res.append(dict(impl=impl, kernel=kname, dtype=d, rows=r, cols=c, ms=ms, gbs=gbs, copy_gbs=cbw))
                    print(f"{impl:<8} {kname:<11} {d:<5} {r}x{c:<7} {ms*1e3:9.1f} us {gbs:7.0f} GB/s {100*gbs/cbw:5.1f}%", flush=True)
                del xs
                torch.cuda.empty_cache()
    if out:
        with open(out, "w") as fh:
            for x in res:
                fh.write(json.dumps(x) + "\n")

if __name__ == "__main__":
    main()
