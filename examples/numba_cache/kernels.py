"""SmolLM2-135M's small kernels as @njit(cache=True) functions (float32)."""
import math

import numpy as np
from numba import njit

from activations import silu
from smollm2_config import HEAD_DIM, RMS_EPS, ROPE_THETA


@njit(cache=True)
def rmsnorm(x, w):
    """x: (tokens, HIDDEN); w: (HIDDEN,)."""
    out = np.empty_like(x)
    n = x.shape[1]
    for t in range(x.shape[0]):
        ss = 0.0
        for i in range(n):
            ss += x[t, i] * x[t, i]
        inv = 1.0 / math.sqrt(ss / n + RMS_EPS)
        for i in range(n):
            out[t, i] = x[t, i] * inv * w[i]
    return out


@njit(cache=True)
def softmax(x):
    """Row-wise softmax of attention scores (rows, cols)."""
    out = np.empty_like(x)
    for r in range(x.shape[0]):
        m = x[r, 0]
        for c in range(1, x.shape[1]):
            m = max(m, x[r, c])
        s = 0.0
        for c in range(x.shape[1]):
            e = math.exp(x[r, c] - m)
            out[r, c] = e
            s += e
        for c in range(x.shape[1]):
            out[r, c] /= s
    return out


@njit(cache=True)
def rope(q, pos0):
    """Rotary embedding, rotate-half form: q (tokens, heads, HEAD_DIM)."""
    out = np.empty_like(q)
    half = HEAD_DIM // 2
    for t in range(q.shape[0]):
        for i in range(half):
            ang = (pos0 + t) * ROPE_THETA ** (-2.0 * i / HEAD_DIM)
            c, s = math.cos(ang), math.sin(ang)
            for h in range(q.shape[1]):
                a, b = q[t, h, i], q[t, h, i + half]
                out[t, h, i] = a * c - b * s
                out[t, h, i + half] = b * c + a * s
    return out


@njit(cache=True)
def silu_gate(g, u):
    """The MLP's SiLU(gate) * up: (tokens, INTERMEDIATE) each."""
    out = np.empty_like(g)
    for t in range(g.shape[0]):
        for i in range(g.shape[1]):
            out[t, i] = silu(g[t, i]) * u[t, i]
    return out


@njit(cache=True)
def matmul_tile(a, b, out, i0, j0, tile):
    """out[i0:i0+tile, j0:j0+tile] = a[i0:i0+tile, :] @ b[:, j0:j0+tile]."""
    for i in range(i0, min(i0 + tile, a.shape[0])):
        for j in range(j0, min(j0 + tile, b.shape[1])):
            s = 0.0
            for k in range(a.shape[1]):
                s += a[i, k] * b[k, j]
            out[i, j] = s


def reference(name, *args):
    """NumPy versions, to check every answer."""
    if name == "rmsnorm":
        x, w = args
        return x / np.sqrt((x * x).mean(axis=1, keepdims=True) + RMS_EPS) * w
    if name == "softmax":
        e = np.exp(args[0] - args[0].max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    if name == "rope":
        q, pos0 = args
        half = HEAD_DIM // 2
        pos = np.arange(pos0, pos0 + q.shape[0])[:, None]
        ang = pos * ROPE_THETA ** (-2.0 * np.arange(half) / HEAD_DIM)
        c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        a, b = q[..., :half], q[..., half:]
        return np.concatenate([a * c - b * s, b * c + a * s], axis=-1)
    if name == "silu_gate":
        g, u = args
        return g / (1.0 + np.exp(-g)) * u
    raise KeyError(name)
