"""Throughput of the metrics scorers (images/s) beside the obvious alternatives, on CPU.

    .venv/bin/python benchmarks/bench_metrics.py [--sizes 256,518] [--frames 16] [--repeats 3]

Alternatives measured in the same run:
  * SSIM: scikit-image structural_similarity called per image (same settings);
  * LPIPS: the lpips package called per image pair (same network and weights);
  * PSNR: a per-image numpy loop.
NVS-SQA scores one sequence of --frames views (its unit is a sequence); reported as frames/s.
Prints a Markdown table (and writes it to --out when given); ``--doc docs/speed/metrics.md``
writes it with the command, date and machine (``benchmarks/speed_doc.py``), the file the
metrics manual quotes.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def best_times(fns, repeats: int) -> list[float]:
    """Best wall time of each function; repeats are interleaved (A B A B ...) so that load
    from other processes on a shared machine hits the alternatives alike."""
    for fn in fns:
        fn()  # warm-up (allocations, lazy inits, oneDNN primitives for this shape)
    best = [float("inf")] * len(fns)
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            start = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - start)
    return best


def make_pair(rng: np.random.Generator, n: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    from scipy.ndimage import gaussian_filter

    ref = gaussian_filter(rng.random((n, size, size, 3)), sigma=(0, 3, 3, 0))
    ref = (ref - ref.min()) / (ref.max() - ref.min())
    pred = np.clip(ref + 0.05 * rng.standard_normal(ref.shape), 0, 1)
    return pred, ref  # float64 in [0, 1]: what every scorer converts to (skimage included)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="256,518", help="square image sides in pixels")
    parser.add_argument("--frames", type=int, default=16, help="images per batch")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats (best is kept)")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--out", help="also write the Markdown table to this file")
    parser.add_argument("--doc", help="write the generated speed doc (Markdown) here")
    parser.add_argument("--doc-note", action="append", default=[],
                        help="a sentence for the speed doc's notes (repeatable), e.g. why "
                             "sizes or repeats were reduced")
    args = parser.parse_args()
    from speed_doc import Table, cpu_model, render_table, run_started, write_speed_doc

    started = run_started()

    import lpips
    import torch
    from skimage.metrics import structural_similarity

    from metrics.lpips_scorer import build_lpips_network
    from metrics.registry import get_scorer

    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    psnr, ssim, lp, sqa = (get_scorer(n, device="cpu") for n in ("psnr", "ssim", "lpips",
                                                                   "nvs-sqa"))
    package_net, _ = build_lpips_network(device="cpu")  # the lpips.LPIPS module itself

    def psnr_loop(pred, ref):
        return [10 * np.log10(1 / np.mean((p - r) ** 2))
                for p, r in zip(pred, ref, strict=True)]

    def skimage_loop(pred, ref):
        return [structural_similarity(p, r, gaussian_weights=True, sigma=1.5,
                                      use_sample_covariance=False, data_range=1, channel_axis=-1)
                for p, r in zip(pred, ref, strict=True)]

    def lpips_package_loop(pred, ref):
        out = []
        with torch.no_grad():
            for p, r in zip(pred, ref, strict=True):
                tp = torch.from_numpy(p).permute(2, 0, 1)[None].float()
                tr = torch.from_numpy(r).permute(2, 0, 1)[None].float()
                out.append(package_net(tp, tr, normalize=True).item())
        return out

    del lpips  # imported to state the alternative's package explicitly
    cases = []  # (metric, size label, implementation, fn)
    for size in (int(s) for s in args.sizes.split(",")):
        pred, ref = make_pair(rng, args.frames, size)
        label = f"{size}x{size}"
        cases += [
            ("psnr", label, "splatbench (numpy, batched)", lambda p=pred, r=ref: psnr(p, r)),
            ("psnr", label, "numpy loop, no input checks", lambda p=pred, r=ref: psnr_loop(p, r)),
            ("ssim", label, "splatbench (scipy, 15 planes per frame)",
             lambda p=pred, r=ref: ssim(p, r)),
            ("ssim", label, "skimage per image", lambda p=pred, r=ref: skimage_loop(p, r)),
            ("lpips", label, "splatbench (batched 8)", lambda p=pred, r=ref: lp(p, r)),
            ("lpips", label, "lpips package per image",
             lambda p=pred, r=ref: lpips_package_loop(p, r)),
            ("nvs-sqa", label, f"splatbench (1 sequence of {args.frames})",
             lambda p=pred: sqa(p)),
        ]
    # one untimed pass over every case and size first: the first large-tensor runs in a fresh
    # process are several times slower (allocator growth, oneDNN primitive caches), which
    # otherwise penalises whichever size is timed first
    for _, _, _, fn in cases:
        fn()
    rows = []
    for key in dict.fromkeys((m, size) for m, size, _, _ in cases):
        group = [(impl, fn) for m, size, impl, fn in cases if (m, size) == key]
        for (impl, _), seconds in zip(group, best_times([fn for _, fn in group], args.repeats),
                                      strict=True):
            rows.append((key[0], key[1], impl, args.frames / seconds))
            print(f"{key[0]:8s} {key[1]} {impl:44s} {args.frames / seconds:9.1f} images/s",
                  flush=True)

    header = (f"CPU: {cpu_model()}, torch threads "
              f"{args.threads}, {args.frames} images per batch, best of {args.repeats}")
    table = Table(header, ["metric", "size", "implementation", "images/s"],
                  [[m, s, i, f"{v:.1f}"] for m, s, i, v in rows], align=["l", "l", "l", "r"])
    print()
    print(render_table(table))
    if args.out:
        with open(args.out, "w") as handle:
            handle.write(render_table(table) + "\n")
    if args.doc:
        write_speed_doc(
            args.doc, title="Metrics speed: splatbench scorers vs the obvious alternatives (CPU)",
            tables=[table], started=started,
            notes=["Inputs: float64 image pairs in [0, 1] (a blurred random reference and it "
                   "plus 5% noise), seed 0. Every case runs once untimed, then the alternatives "
                   f"of one metric and size are timed interleaved and the best of {args.repeats} "
                   "is kept.",
                   "NVS-SQA scores one sequence of the frames (its unit is a sequence); its row "
                   "is frames/s.", *args.doc_note])

if __name__ == "__main__":
    main()
