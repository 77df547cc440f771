"""SplitMix64 as kernels/rng.h, so deqtorch draws the numbers deqbench
draws: the methods' uniform (0, 1] values (splitmix64_u01) and Gaussian
probes (Box–Muller as methods/method.c method_gaussian, both outputs of
each pair). Vectorised with numpy's wrapping uint64 arithmetic; the
Gaussians go through numpy's log/sqrt/cos/sin, which may differ from
glibc's in the last bit."""
import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_MASK = (1 << 64) - 1


class SplitMix64:
    """One generator state (a uint64 seed, as method_seed)."""

    def __init__(self, seed):
        self.s = int(seed) & _MASK

    def u01(self, m):
        """m uniforms in (0, 1]: ((top 53 bits) + 0.5) 2^-53 each."""
        k = np.arange(1, m + 1, dtype=np.uint64)
        z = np.uint64(self.s) + k * _GOLDEN  # wraps mod 2^64
        self.s = (self.s + m * int(_GOLDEN)) & _MASK
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        z = z ^ (z >> np.uint64(31))
        return ((z >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0**-53

    def gaussian(self, n):
        """n standard normals: pairs (r cos a, r sin a) from two uniforms,
        r = √(−2 ln u1), a = 2π u2; an odd n still draws the last pair."""
        d = self.u01(2 * ((n + 1) // 2))
        r = np.sqrt(-2.0 * np.log(d[0::2]))
        a = 2.0 * np.pi * d[1::2]
        x = np.empty(d.size)
        x[0::2], x[1::2] = r * np.cos(a), r * np.sin(a)
        return x[:n]
