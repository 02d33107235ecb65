#!/usr/bin/env python3
"""GPU ceilings for scripts/gpu_checks.sh, through the machine's own torch (TF32 off, as alps runs).

  gpu_ceilings.py machine   product rates (fp16 with fp32 accumulation, fp32), page-locked copy bandwidths and
                            cuSOLVER's factorizations at the layer widths: what docs/benchmarks.md's bounds divide by
  gpu_ceilings.py trsm      the Cholesky B-update's triangular solves at the layers' widths (7B: 4096 and 11008,
                            70B: 8192 and 28672 columns): cuSOLVER's potrs against the blocked substitution of
                            core/linalg's CholeskySolver (matrix products; diagonal blocks inverted once per
                            factorization), and one product of the same size (the floor)
"""
import sys
import time

import torch

torch.backends.cuda.matmul.allow_tf32 = False


def timed(f, n):
    f(); torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(n): f()
    torch.cuda.synchronize(); return (time.perf_counter() - t) / n


def machine():
    for dt in (torch.float16, torch.float32):
        a, b = (torch.randn(8192, 8192, device="cuda", dtype=dt) for _ in range(2))
        print(f"ceiling matmul {dt}: {2 * 8192**3 / timed(lambda: a @ b, 5) / 1e12:.0f} TFLOP/s")
    h = torch.empty(1 << 30, dtype=torch.uint8).pin_memory()
    d = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    print(f"ceiling host->device {(1 << 30) / timed(lambda: d.copy_(h, non_blocking=True), 5) / 1e9:.1f} GB/s")
    print(f"ceiling device->host {(1 << 30) / timed(lambda: h.copy_(d, non_blocking=True), 5) / 1e9:.1f} GB/s")
    e = torch.empty_like(d)
    print(f"ceiling device copy {2 * (1 << 30) / timed(lambda: e.copy_(d), 5) / 1e9:.0f} GB/s (read + write)")
    for n in (4096, 8192, 11008):
        x = torch.randn(n + 64, n, device="cuda"); A = x.T @ x / n + torch.eye(n, device="cuda")
        L = torch.linalg.cholesky(A); R = torch.randn(n, 4096, device="cuda")
        print(f"factor n={n}: syevd fp32 {timed(lambda: torch.linalg.eigh(A), 1):.3f} s, "
              f"potrf fp32 {timed(lambda: torch.linalg.cholesky(A), 3):.4f} s, "
              f"cholesky_solve with 4096 columns {timed(lambda: torch.cholesky_solve(R, L), 3):.4f} s, "
              f"product [n,n]x[n,4096] {timed(lambda: A @ R, 3):.4f} s")


def trsm():
    for n, out in ((4096, 4096), (4096, 11008), (8192, 8192), (11008, 4096), (28672, 8192)):
        x = torch.randn(n + 64, n, device="cuda") / n ** 0.5; A = x.T @ x + torch.eye(n, device="cuda"); del x
        C = torch.linalg.cholesky(A); R = torch.randn(n, out, device="cuda")
        for b in (512, 1024, 2048):
            nb = (n + b - 1) // b
            inv = [torch.linalg.solve_triangular(C[i*b:(i+1)*b, i*b:(i+1)*b],
                                                 torch.eye(min(b, n - i*b), device="cuda"), upper=False)
                   for i in range(nb)]
            def blocked():
                X = torch.empty_like(R)
                for i in range(nb):  # C X = R
                    s = slice(i*b, min(n, (i+1)*b)); T = R[s].clone()
                    if i: T.addmm_(C[s, :i*b], X[:i*b], alpha=-1)
                    torch.mm(inv[i], T, out=X[s])
                B = torch.empty_like(R)
                for i in reversed(range(nb)):  # C^T B = X
                    s = slice(i*b, min(n, (i+1)*b)); T = X[s].clone()
                    if (i+1)*b < n: T.addmm_(C[(i+1)*b:, s].T, B[(i+1)*b:], alpha=-1)
                    torch.mm(inv[i].T, T, out=B[s])
                return B
            ref = torch.cholesky_solve(R, C)
            err = ((blocked() - ref).norm() / ref.norm()).item()
            print(f"trsm n={n} out={out} block {b}: potrs {timed(lambda: torch.cholesky_solve(R, C), 3):.4f} s, "
                  f"blocked {timed(blocked, 3):.4f} s (rel diff {err:.1e}), product {timed(lambda: A @ R, 3):.4f} s, "
                  f"potrf {timed(lambda: torch.linalg.cholesky(A), 1):.4f} s")
        del A, C, R, inv
        torch.cuda.empty_cache()


{"machine": machine, "trsm": trsm}[sys.argv[1]]()
