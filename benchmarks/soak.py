"""Serving soak (issue 40): 8 threads over one model for minutes; RSS flat, answers exact.

    PYTHONPATH=. python benchmarks/soak.py [--minutes 10] [--threads 8] [--warmup-s 60]

The model: a CRFsuite file trained by python-crfsuite (lbfgs, c1=0.1,
c2=0.01, 50 iterations) on 1,500 synthetic sentences (Zipf-distributed words
of a 5,000-word vocabulary, labels from the words' classes with noise;
features: the word, its suffixes, shape, the neighbouring words), written to
the temp folder. One ``CRFTagger.from_crfsuite(path)`` and one
``skcrf.pycrfsuite.Tagger().open(path)`` serve it. 400 held-out sentences
are answered sequentially first (tags, marginals, tags). Then ``--threads``
threads, for ``--minutes``, each loop over the sentences (each thread from
its own start) calling in turn ``predict_single``,
``predict_marginals_single`` and ``Tagger.tag``, and compare every answer
with the sequential one (exactly: the same labels, the same floats). The
main thread samples VmRSS (/proc/self/status) every second. Reported: the
calls, the mismatches, RSS at the end of the warm-up and its range after
(target: within ±5 MB of the warm-up value).
"""

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np


def rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def sentences(rng, n, vocab=5000):
    ranks = np.arange(1, vocab + 1)
    p = 1 / ranks
    p /= p.sum()
    classes = rng.integers(8, size=vocab)
    out = []
    for _ in range(n):
        length = int(rng.integers(3, 30))
        words = rng.choice(vocab, size=length, p=p)
        labels = [f"C{classes[w]}" if rng.random() > 0.1 else f"C{rng.integers(8)}" for w in words]
        out.append(([f"w{w}" for w in words], labels))
    return out


def features(words):
    def at(i):
        if 0 <= i < len(words):
            return words[i]
        return "<pad>"

    return [
        {
            "bias": 1.0,
            "word": words[i],
            "suffix2": words[i][-2:],
            "suffix3": words[i][-3:],
            "len": float(len(words[i])),
            "prev": at(i - 1),
            "next": at(i + 1),
            "prev_next": f"{at(i - 1)}|{at(i + 1)}",
        }
        for i in range(len(words))
    ]


def train(path, data):
    import pycrfsuite

    trainer = pycrfsuite.Trainer(algorithm="lbfgs", verbose=False)
    for words, labels in data:
        trainer.append(features(words), labels)
    trainer.set_params({"c1": 0.1, "c2": 0.01, "max_iterations": 50})
    trainer.train(str(path))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--warmup-s", type=float, default=60.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    import skcrf
    import skcrf.pycrfsuite as sp

    rng = np.random.default_rng(40)
    data = sentences(rng, 1900)
    path = Path(tempfile.gettempdir()) / "skcrf-soak.crfsuite"
    if not path.exists():
        train(path, data[:1500])
    X = [features(words) for words, _ in data[1500:]]

    crf = skcrf.CRFTagger.from_crfsuite(path)
    tagger = sp.Tagger()
    tagger.open(str(path))
    calls = (
        ("predict_single", crf.predict_single),
        ("predict_marginals_single", crf.predict_marginals_single),
        ("Tagger.tag", tagger.tag),
    )

    def answer(name, fn, x):
        out = fn(x)
        return [dict(m) for m in out] if name == "predict_marginals_single" else list(out)

    expected = [[answer(name, fn, x) for x in X] for name, fn in calls]
    rss_start = rss_mb()

    stop = threading.Event()
    counts = [0] * args.threads
    mismatches = [0] * args.threads
    errors = []

    def work(t):
        j = (t * len(X)) // args.threads
        c = t % len(calls)
        try:
            while not stop.is_set():
                name, fn = calls[c]
                if answer(name, fn, X[j]) != expected[c][j]:
                    mismatches[t] += 1
                counts[t] += 1
                c = (c + 1) % len(calls)
                j = (j + 1) % len(X)
        except BaseException as exc:  # reported, not swallowed
            errors.append(f"thread {t}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=work, args=(t,)) for t in range(args.threads)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    samples = []  # (seconds, RSS MB)
    duration = 60 * args.minutes
    while (now := time.perf_counter() - start) < duration and not errors:
        samples.append((now, rss_mb()))
        time.sleep(1.0)
    stop.set()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    samples.append((elapsed, rss_mb()))

    warm = [mb for s, mb in samples if s >= args.warmup_s]
    at_warm = warm[0] if warm else float("nan")
    result = {
        "skcrf": skcrf.__file__,
        "model": str(path),
        "threads": args.threads,
        "seconds": round(elapsed, 1),
        "warmup_s": args.warmup_s,
        "calls": sum(counts),
        "calls_per_s": round(sum(counts) / elapsed, 1),
        "mismatches": sum(mismatches),
        "errors": errors,
        "rss_before_threads_mb": round(rss_start, 1),
        "rss_at_warmup_end_mb": round(at_warm, 1),
        "rss_after_warmup_min_mb": round(min(warm), 1) if warm else None,
        "rss_after_warmup_max_mb": round(max(warm), 1) if warm else None,
        "rss_end_mb": round(samples[-1][1], 1),
        "rss_drift_mb": round(samples[-1][1] - at_warm, 1),
        "rss_max_deviation_mb": round(max(abs(mb - at_warm) for mb in warm), 1) if warm else None,
        "rss_samples": [
            (round(s, 1), round(mb, 1)) for s, mb in samples[:: max(1, len(samples) // 60)]
        ],
    }
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    ok = not errors and not result["mismatches"] and (result["rss_max_deviation_mb"] or 0) <= 5
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
