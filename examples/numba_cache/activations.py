"""The activation the MLP gate uses; a separate module so that the README can
show an edit here reaching the kernel that calls it in the next process."""
import math

from numba import njit


@njit(cache=True)
def silu(x):
    return x / (1.0 + math.exp(-x))
