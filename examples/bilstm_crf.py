"""
A BiLSTM-CRF part-of-speech tagger with PyTorch (skcrf.torch)
=============================================================

A small neural tagger on the Treebank task (the first 80% of the NLTK
treebank sample's sentences train, the rest test): word embeddings and a
character CNN per word feed a bidirectional LSTM whose outputs are the
emission scores of a :class:`skcrf.torch.CRF` layer. The loss is the CRF's
negative log-likelihood; prediction is Viterbi decoding. It trains on the CPU
in a few minutes, prints the test accuracy per epoch and, with ``--plot``,
draws the learning curves (training loss, test accuracy)::

    pip install "skcrf[torch,examples]"      # torch==2.13.0 on the project's machines
    python examples/bilstm_crf.py                       # 15 epochs, a few minutes
    python examples/bilstm_crf.py --plot bilstm_crf.png
    python examples/bilstm_crf.py --max-sentences 100 --epochs 1   # a smoke run

The documentation shows this script without running it (it needs PyTorch and
minutes of CPU); docs/user_guide/torch.md gives the accuracy of a full run
next to CRFTagger's. Without network access, set NLTK_DATA to a folder that
holds corpora/treebank.zip.
"""

import argparse
import sys
import time
from collections import Counter

import torch
from torch import nn

from skcrf.datasets import load_treebank
from skcrf.torch import CRF


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=(__doc__ or "").strip().split("\n")[0])
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--max-sentences", type=int, default=None, help="a quick run")
    parser.add_argument("--max-steps", type=int, default=None, help="stop after this many batches")
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot", default=None, help="save the learning curves to this file")
    return parser.parse_args(argv)


class Vocabulary:
    """Index of the strings seen in training; 0 pads, 1 is unknown."""

    def __init__(self, items, min_count=1):
        counts = Counter(items)
        self.index = {
            s: i + 2 for i, s in enumerate(sorted(s for s, c in counts.items() if c >= min_count))
        }
        # seen once in training: dropped to "unknown" at random while training, so that
        # the unknown word's embedding is trained too (the test has unseen words)
        self.rare = {self.index[s] for s, c in counts.items() if c == 1 and s in self.index}

    def __len__(self):
        return len(self.index) + 2

    def __call__(self, item):
        return self.index.get(item, 1)


class BiLSTMCRF(nn.Module):
    def __init__(
        self, n_words, n_chars, n_tags, word_dim=64, char_dim=24, char_filters=48, hidden=96
    ):
        super().__init__()
        self.words = nn.Embedding(n_words, word_dim, padding_idx=0)
        self.chars = nn.Embedding(n_chars, char_dim, padding_idx=0)
        self.char_cnn = nn.Conv1d(char_dim, char_filters, kernel_size=3, padding=1)
        self.dropout = nn.Dropout(0.3)
        self.lstm = nn.LSTM(word_dim + char_filters, hidden, batch_first=True, bidirectional=True)
        self.emissions = nn.Linear(2 * hidden, n_tags)
        self.crf = CRF(n_tags, batch_first=True)

    def scores(self, words, chars):
        # chars: (batch, length, word_length) -> one vector per word (max over positions)
        b, n, m = chars.shape
        c = self.chars(chars.view(b * n, m)).transpose(1, 2)
        c = torch.relu(self.char_cnn(c)).max(dim=2).values.view(b, n, -1)
        h = torch.cat([self.words(words), c], dim=-1)
        h, _ = self.lstm(self.dropout(h))
        return self.emissions(self.dropout(h))

    def loss(self, words, chars, tags, mask):
        return -self.crf(self.scores(words, chars), tags, mask, reduction="token_mean")

    def predict(self, words, chars, mask):
        return self.crf.decode(self.scores(words, chars), mask)


def encode(sentences, word_vocab, char_vocab, tag_index, max_word=20, generator=None):
    """Padded tensors (words, chars, tags, mask) of a batch of tagged sentences.

    With a ``generator`` (training), a word seen once in training becomes
    "unknown" with probability 1/2.
    """
    n = max(len(s) for s in sentences)
    m = min(max_word, max(len(w) for s in sentences for w, _ in s))
    words = torch.zeros(len(sentences), n, dtype=torch.long)
    chars = torch.zeros(len(sentences), n, m, dtype=torch.long)
    tags = torch.zeros(len(sentences), n, dtype=torch.long)
    mask = torch.zeros(len(sentences), n, dtype=torch.bool)
    for i, sentence in enumerate(sentences):
        for j, (word, tag) in enumerate(sentence):
            words[i, j] = word_vocab(word.lower())
            ids = [char_vocab(c) for c in word[:m]]
            chars[i, j, : len(ids)] = torch.tensor(ids)
            tags[i, j] = tag_index.get(tag, 0)
            mask[i, j] = True
    if generator is not None and word_vocab.rare:
        rare = torch.isin(words, torch.tensor(sorted(word_vocab.rare)))
        drop = rare & (torch.rand(words.shape, generator=generator) < 0.5)
        words = words.masked_fill(drop, 1)
    return words, chars, tags, mask


def batches(sentences, size, shuffle, generator=None):
    order = (
        torch.randperm(len(sentences), generator=generator).tolist()
        if shuffle
        else range(len(sentences))
    )
    order = list(order)
    for start in range(0, len(order), size):
        yield [sentences[i] for i in order[start : start + size]]


def accuracy(model, sentences, encoders):
    model.eval()
    right = total = 0
    with torch.no_grad():
        for chunk in batches(sentences, 64, shuffle=False):
            words, chars, tags, mask = encode(chunk, *encoders)
            for path, gold, m in zip(model.predict(words, chars, mask), tags, mask):
                n = int(m.sum())
                right += sum(int(p == g) for p, g in zip(path, gold[:n].tolist()))
                total += n
    model.train()
    return right / total


def main(argv=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    try:
        train, test = load_treebank(max_sentences=args.max_sentences)
    except LookupError as exc:
        sys.exit(str(exc))
    print(f"train: {len(train)} sentences; test: {len(test)} sentences")
    word_vocab = Vocabulary(w.lower() for s in train for w, _ in s)
    char_vocab = Vocabulary(c for s in train for w, _ in s for c in w)
    tag_list = sorted({t for s in train for _, t in s})
    tag_index = {t: i for i, t in enumerate(tag_list)}
    encoders = (word_vocab, char_vocab, tag_index)
    model = BiLSTMCRF(len(word_vocab), len(char_vocab), len(tag_list))
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    generator = torch.Generator().manual_seed(args.seed)
    history = {"step": [], "loss": [], "epoch": [], "test_accuracy": []}
    step = 0
    start = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        for chunk in batches(train, args.batch_size, shuffle=True, generator=generator):
            loss = model.loss(*encode(chunk, *encoders, generator=generator))
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            optimizer.step()
            step += 1
            history["step"].append(step)
            history["loss"].append(loss.item())
            if args.max_steps and step >= args.max_steps:
                break
        acc = accuracy(model, test, encoders)
        history["epoch"].append(epoch)
        history["test_accuracy"].append(acc)
        recent = history["loss"][-20:]
        print(
            f"epoch {epoch}: loss per token {sum(recent) / len(recent):.4f}, "
            f"test accuracy {acc:.4f} ({time.perf_counter() - start:.0f} s)"
        )
        if args.max_steps and step >= args.max_steps:
            break
    print(f"test token accuracy: {history['test_accuracy'][-1]:.4f}")
    print(f"training time: {time.perf_counter() - start:.0f} s")
    if args.plot:
        import matplotlib.pyplot as plt

        fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
        left.plot(history["step"], history["loss"], lw=0.5)
        left.set(
            xlabel="batch",
            ylabel="negative log-likelihood per token",
            title="training loss",
            yscale="log",
        )
        right.plot(history["epoch"], history["test_accuracy"], marker="o")
        right.set(xlabel="epoch", ylabel="token accuracy", title="test accuracy")
        fig.tight_layout()
        fig.savefig(args.plot)
        print(f"saved {args.plot}")


if __name__ == "__main__":
    main()
