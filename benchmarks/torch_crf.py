"""skcrf.torch.CRF against pytorch-crf (targets: >= 1x everywhere, >= 2x on forward+backward).

Two shapes (batch 32 x length 50 x 46 tags, batch 8 x length 400 x 46 tags,
float32, every sequence of the batch with its own length: a mask of random
lengths, the longest full), two operations (the log-likelihood forward and
its backward, as one training step computes them; ``decode``), one and two
threads (``torch.set_num_threads``), on the CPU. Both layers get the same
parameters and inputs; their results are checked equal before timing
(log-likelihood to 1e-4 relative, the gradients to 1e-4, identical paths).

Each repetition times skcrf then pytorch-crf (alternated, ``--repeats``
times; each time the best of ``--inner`` calls), so drifts of the machine
hit both. A table value is the median over repetitions; the speed-up is the
median of the per-repetition ratios (pytorch-crf's time over skcrf's).

    pip install torch==2.13.0 pytorch-crf==0.7.2
    PYTHONPATH=. python benchmarks/torch_crf.py             # ~1-2 minutes
    PYTHONPATH=. python benchmarks/torch_crf.py --quick     # smoke test

Prints a table and writes ``benchmarks/results/torch_crf.json``.
"""

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch
import torchcrf

from skcrf.torch import CRF

HERE = Path(__file__).resolve().parent
NUM_TAGS = 46
SHAPES = [(32, 50), (8, 400)]


def inputs(batch_size, seq_length, seed=0):
    g = torch.Generator().manual_seed(seed)
    emissions = torch.randn(batch_size, seq_length, NUM_TAGS, generator=g)
    tags = torch.randint(NUM_TAGS, (batch_size, seq_length), generator=g)
    lengths = torch.randint(seq_length // 2, seq_length + 1, (batch_size,), generator=g)
    lengths[0] = seq_length
    mask = torch.arange(seq_length)[None, :] < lengths[:, None]
    return emissions, tags, mask


def layers():
    ours = CRF(NUM_TAGS, batch_first=True)
    theirs = torchcrf.CRF(NUM_TAGS, batch_first=True)
    theirs.load_state_dict(ours.state_dict())
    return ours, theirs


def train_step(crf, emissions, tags, mask):
    em = emissions.detach().requires_grad_(True)
    crf.zero_grad(set_to_none=True)
    loss = -crf(em, tags, mask, reduction="mean")
    loss.backward()
    return loss.detach(), em.grad, crf.transitions.grad


def check(ours, theirs, emissions, tags, mask):
    a, b = train_step(ours, emissions, tags, mask), train_step(theirs, emissions, tags, mask)
    torch.testing.assert_close(a[0], b[0], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(a[1], b[1], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(a[2], b[2], rtol=1e-4, atol=1e-4)
    assert ours.decode(emissions, mask) == theirs.decode(emissions, mask), "paths differ"


def operation(op, crf, emissions, tags, mask):
    """The timed call: a training step's forward and backward, or decode."""
    if op == "forward+backward":
        return lambda: train_step(crf, emissions, tags, mask)
    return lambda: crf.decode(emissions, mask)


def best_of(fn, inner):
    times = []
    for _ in range(inner):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--inner", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="1 repetition of 1 call (smoke test)")
    parser.add_argument("--output", default=str(HERE / "results" / "torch_crf.json"))
    args = parser.parse_args()
    if args.quick:
        args.repeats, args.inner = 1, 1
    load = os.getloadavg()
    rows = []
    for threads in (1, 2):
        torch.set_num_threads(threads)
        for batch_size, seq_length in SHAPES:
            emissions, tags, mask = inputs(batch_size, seq_length)
            ours, theirs = layers()
            check(ours, theirs, emissions, tags, mask)
            data = (emissions, tags, mask)
            for op in ("forward+backward", "decode"):
                mine, peer = [], []
                for _ in range(args.repeats):
                    mine.append(best_of(operation(op, ours, *data), args.inner))
                    peer.append(best_of(operation(op, theirs, *data), args.inner))
                ratio = statistics.median(p / m for p, m in zip(peer, mine))
                rows.append(
                    {
                        "threads": threads,
                        "batch_size": batch_size,
                        "seq_length": seq_length,
                        "num_tags": NUM_TAGS,
                        "tokens": int(mask.sum()),
                        "operation": op,
                        "skcrf_ms": 1000 * statistics.median(mine),
                        "pytorch_crf_ms": 1000 * statistics.median(peer),
                        "speedup": ratio,
                        "target": 2.0 if op == "forward+backward" else 1.0,
                        "skcrf_runs_ms": [1000 * t for t in mine],
                        "pytorch_crf_runs_ms": [1000 * t for t in peer],
                    }
                )
    header = "| threads | batch x length x tags | operation | skcrf.torch (ms) | pytorch-crf (ms) | speed-up | target |"
    print(header)
    print("|" + "---|" * 7)
    for r in rows:
        print(
            f"| {r['threads']} | {r['batch_size']} x {r['seq_length']} x {r['num_tags']} | {r['operation']} "
            f"| {r['skcrf_ms']:.2f} | {r['pytorch_crf_ms']:.2f} | {r['speedup']:.2f}x | >= {r['target']:.0f}x |"
        )
    print(f"load average at start: {load[0]:.2f} (a shared machine: the figures are noisy)")
    report = {
        "benchmark": "skcrf.torch.CRF against pytorch-crf (torchcrf.CRF), CPU, float32",
        "repeats": args.repeats,
        "inner": args.inner,
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "torch": torch.__version__,
            "pytorch_crf": torchcrf.__version__,
            "cpu_count": os.cpu_count(),
            "load_average_at_start": load,
        },
        "rows": rows,
    }
    if not args.quick:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        with open(args.output, "w") as f:
            json.dump(report, f, indent=1)
        print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
