#!/usr/bin/env python3
"""Independent float64 reference for the demo model.

This file re-derives the demo model from its written specification (the
"Model" section of images/demo-engine/README.md): its own weight generation
from the seed, its own forward pass. It reads nothing from the C engine, so a
mistake shared by both would have to be made twice.

  python reference_model.py --doc PATH --depths 4,128,... --rows R --out DIR

writes DIR/logits.npy, float32 [len(depths), rows, vocab]: row r of depth d is
the next-token logits after a prefix of d - rows + 1 + r document tokens.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

# --- the model's specification (must match the engine's README) -----------
SEED = 0x5EED_DE30
VOCAB = 2048
DIM = 128
LAYERS = 4
HEADS = 4
HEAD_DIM = DIM // HEADS
FFN = 384
ROPE_BASE = 10000.0
NORM_EPS = 1e-5
# Per-tensor gains: a weight is u * gain / sqrt(fan_in), u uniform on [-1, 1).
GAIN_EMB, GAIN_Q, GAIN_K, GAIN_V, GAIN_O = 1.0, 2.5, 2.5, 1.7, 1.0
GAIN_W1, GAIN_W3, GAIN_W2, GAIN_HEAD = 1.7, 1.7, 1.0, 5.0

GOLDEN = 0x9E3779B97F4A7C15
M64 = (1 << 64) - 1


def splitmix64_block(start: int, count: int) -> np.ndarray:
    """Outputs start+1 .. start+count of the splitmix64 stream seeded with SEED."""
    with np.errstate(over="ignore"):
        i = np.arange(start + 1, start + count + 1, dtype=np.uint64)
        z = np.uint64(SEED) + i * np.uint64(GOLDEN)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return z


class Weights:
    """Draws the tensors in the specified order from one splitmix64 stream."""

    def __init__(self) -> None:
        self.pos = 0

    def tensor(self, rows: int, cols: int, gain: float, fan_in: int | None = None) -> np.ndarray:
        z = splitmix64_block(self.pos, rows * cols)
        self.pos += rows * cols
        k = (z >> np.uint64(40)).astype(np.int64) - (1 << 23)   # [-2^23, 2^23)
        scale = gain / math.sqrt(cols if fan_in is None else fan_in) / 8388608.0
        # The engine stores float32; the reference starts from the same values.
        w = (k.astype(np.float64) * scale).astype(np.float32).astype(np.float64)
        return w.reshape(rows, cols)


def build_weights() -> dict:
    g = Weights()
    w = {"emb": g.tensor(VOCAB, DIM, GAIN_EMB, fan_in=1), "layers": []}
    for _ in range(LAYERS):
        w["layers"].append({
            "wq": g.tensor(DIM, DIM, GAIN_Q), "wk": g.tensor(DIM, DIM, GAIN_K),
            "wv": g.tensor(DIM, DIM, GAIN_V), "wo": g.tensor(DIM, DIM, GAIN_O),
            "w1": g.tensor(FFN, DIM, GAIN_W1), "w3": g.tensor(FFN, DIM, GAIN_W3),
            "w2": g.tensor(DIM, FFN, GAIN_W2),
        })
    w["head"] = g.tensor(VOCAB, DIM, GAIN_HEAD)
    return w


def rmsnorm(x: np.ndarray) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + NORM_EPS)


def rope(x: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """x: [n, heads, head_dim]; rotates pairs (2i, 2i+1) by pos * base^(-2i/head_dim)."""
    i = np.arange(HEAD_DIM // 2, dtype=np.float64)
    theta = ROPE_BASE ** (-2.0 * i / HEAD_DIM)
    ang = positions[:, None].astype(np.float64) * theta[None, :]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = x0 * c - x1 * s
    out[..., 1::2] = x0 * s + x1 * c
    return out


def causal_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, chunk: int = 512) -> np.ndarray:
    """q, k, v: [n, heads, head_dim] -> [n, heads, head_dim], chunked over queries."""
    n = q.shape[0]
    out = np.empty_like(q)
    scale = 1.0 / math.sqrt(HEAD_DIM)
    for h in range(HEADS):
        kh, vh = k[:, h, :], v[:, h, :]
        for a in range(0, n, chunk):
            b = min(n, a + chunk)
            s = (q[a:b, h, :] @ kh[:b].T) * scale
            s[np.arange(b)[None, :] > np.arange(a, b)[:, None]] = -np.inf
            s -= s.max(axis=1, keepdims=True)
            p = np.exp(s)
            p /= p.sum(axis=1, keepdims=True)
            out[a:b, h, :] = p @ vh[:b]
    return out


def forward(w: dict, tokens: np.ndarray) -> np.ndarray:
    """Final hidden states (before the last norm) for every position: [n, DIM]."""
    n = len(tokens)
    pos = np.arange(n)
    x = w["emb"][tokens].copy()
    for lw in w["layers"]:
        xn = rmsnorm(x)
        q = rope((xn @ lw["wq"].T).reshape(n, HEADS, HEAD_DIM), pos)
        k = rope((xn @ lw["wk"].T).reshape(n, HEADS, HEAD_DIM), pos)
        v = (xn @ lw["wv"].T).reshape(n, HEADS, HEAD_DIM)
        x = x + causal_attention(q, k, v).reshape(n, DIM) @ lw["wo"].T
        xn = rmsnorm(x)
        g, u = xn @ lw["w1"].T, xn @ lw["w3"].T
        x = x + ((g / (1.0 + np.exp(-g))) * u) @ lw["w2"].T
    return x


def logits_at(w: dict, hidden: np.ndarray) -> np.ndarray:
    return rmsnorm(hidden) @ w["head"].T


def read_doc(path: str) -> np.ndarray:
    ids = np.array([int(t) for t in Path(path).read_text().split()], dtype=np.int64)
    if ids.size == 0 or ids.min() < 0 or ids.max() >= VOCAB:
        raise ValueError(f"{path}: token ids must be in [0, {VOCAB})")
    return ids


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--doc", required=True)
    ap.add_argument("--depths", required=True, help="comma-separated, e.g. 4,128,4096")
    ap.add_argument("--rows", type=int, default=1)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    depths = [int(d) for d in a.depths.split(",") if d.strip()]
    doc = read_doc(a.doc)
    if a.rows < 1 or min(depths) < a.rows or max(depths) > len(doc):
        print(f"depths must lie in [rows, {len(doc)}] and rows >= 1", file=sys.stderr)
        return 2
    w = build_weights()
    hidden = forward(w, doc[: max(depths)])
    out = np.empty((len(depths), a.rows, VOCAB), dtype=np.float32)
    for i, d in enumerate(depths):
        prefixes = [d - a.rows + 1 + r for r in range(a.rows)]
        out[i] = logits_at(w, hidden[[p - 1 for p in prefixes]])
    if a.rows == 1:
        out = out[:, 0, :]
    Path(a.out).mkdir(parents=True, exist_ok=True)
    np.save(Path(a.out) / "logits.npy", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
