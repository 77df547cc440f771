"""Fixed-point solvers x = F(x) with deqbench's stopping rules
(methods/solvers.c, docs/ARCHITECTURE.md §Methods).

x is an (S, m) tensor: S independent problems (one per sample with
solver_batching=per_sample, S = 1 with global). Every solve starts at
x0 = 0 and counts every evaluation of F (x0's included) against max_iter.
After each evaluation: the residual ‖F(x) − x‖ (abs) or
‖F(x) − x‖ / ‖F(x)‖ (rel) per sample; each sample keeps its
lowest-residual iterate; the batch residual is that of the bests' summed
squares; stop at tol (scope batch: the batch residual; sample: every
sample's own, finished samples frozen), at max_iter, at a non-finite
residual, at protect_thres (residual above that multiple of the first)
or stall_window (the last N residuals within a factor 1.3). Norms and
dots are taken in float64 as deqbench's dot_segments does.
"""
import math
from dataclasses import dataclass, field

import torch

STALL_RATIO = 1.3


@dataclass
class Params:
    kind: str           # broyden, anderson, fixed_point
    tol: float
    max_iter: int
    stop: str           # abs, rel
    history: int        # Broyden pairs kept
    anderson_m: int
    anderson_lambda: float
    anderson_beta: float
    scope: str          # batch, sample
    protect: float
    stall: int


@dataclass
class Stats:
    iters: int = 0
    residual: float = math.inf
    abs_residual: float = math.inf
    rel_residual: float = math.inf
    converged: bool = False
    nonfinite: bool = False
    protect_break: bool = False
    stall_break: bool = False
    samples_converged: int = 0
    trace: list = field(default_factory=list)


def _resid(stop, gn, fn):
    rel = gn / fn if fn > 0 else (0.0 if gn == 0 else math.inf)
    return gn if stop == "abs" else rel


def _sq(a):
    return a.double().pow(2).sum(1)


class _Run:
    """Book-keeping shared by the solvers (solvers.c `struct run`)."""

    def __init__(self, F, p, x_like):
        self.F, self.p, self.st = F, p, Stats()
        S = x_like.shape[0]
        self.best = torch.zeros_like(x_like)
        self.best_r = torch.full((S,), math.inf, dtype=torch.float64)
        self.best_gn2 = torch.zeros(S, dtype=torch.float64)
        self.best_fn2 = torch.zeros(S, dtype=torch.float64)
        self.done = torch.zeros(S, dtype=torch.bool)
        self.have_best, self.hist = False, []

    def eval(self, x):
        self.st.iters += 1
        return self.F(x)

    def _best(self, x, gn2, fn2):
        p, st = self.p, self.st
        if p.stop == "abs":
            rk = gn2.sqrt()
        else:
            g, f = gn2.sqrt(), fn2.sqrt()
            rk = torch.where(f > 0, g / f, torch.where(
                g == 0, torch.zeros_like(g), torch.full_like(g, math.inf)))
        imp = ~self.done & ((rk < self.best_r) | (not self.have_best))
        self.best_r = torch.where(imp, rk, self.best_r)
        self.best_gn2 = torch.where(imp, gn2, self.best_gn2)
        self.best_fn2 = torch.where(imp, fn2, self.best_fn2)
        if bool(imp.any()):
            self.best[imp.to(x.device)] = x[imp.to(x.device)]
        self.have_best = True
        G, Fn = float(self.best_gn2.sum()), float(self.best_fn2.sum())
        st.abs_residual = math.sqrt(G)
        st.rel_residual = _resid("rel", math.sqrt(G), math.sqrt(Fn))
        st.residual = st.abs_residual if p.stop == "abs" else st.rel_residual
        st.samples_converged = int((self.best_r <= p.tol).sum())
        if p.scope == "batch":
            return st.residual <= p.tol
        self.done |= self.best_r <= p.tol
        return bool(self.done.all())

    def check(self, x, gn2, fn2):
        """True when the solve must stop after iterate x with per-sample
        ‖g‖², ‖F‖² (float64 tensors). The per-sample book-keeping (best
        residuals, done flags) lives on the host, as Anderson's Gram matrix
        does: gn2 and fn2 come from x's device (CUDA: with them on the device,
        every DEQ run failed on mixed devices)."""
        gn2, fn2 = gn2.cpu(), fn2.cpu()
        G, Fn = float(gn2.sum()), float(fn2.sum())
        res = _resid(self.p.stop, math.sqrt(G) if G >= 0 else G,
                     math.sqrt(Fn) if Fn >= 0 else Fn)
        self.st.trace.append(res)
        if not (math.isfinite(res) and math.isfinite(G)
                and math.isfinite(Fn)):
            self.st.nonfinite = True
            return True
        if self._best(x, gn2, fn2):
            return True
        self.hist.append(res)
        return self._breaks()

    def _breaks(self):
        p, h, k = self.p, self.hist, len(self.hist) - 1
        if p.protect > 0 and k > 0 and h[k] > p.protect * h[0]:
            self.st.protect_break = True
            return True
        if p.stall > 0 and k + 1 >= p.stall:
            w = h[k + 1 - p.stall:]
            if max(w) < STALL_RATIO * min(w):
                self.st.stall_break = True
                return True
        return False

    def frozen(self, x):
        return self.done.to(x.device)

    def finish(self):
        st = self.st
        if self.p.scope == "batch":
            st.converged = self.have_best and st.residual <= self.p.tol
        else:
            st.converged = (self.have_best and
                            st.samples_converged == self.best_r.numel())
        return self.best, st


def _fixed_point(r, x):
    while r.st.iters < r.p.max_iter:
        fx = r.eval(x)
        g = fx - x
        if r.check(x, _sq(g), _sq(fx)):
            return
        fz = r.frozen(x)
        x = torch.where(fz[:, None], x, fx)


def _broyden_update(b, dx, dg):
    """Rank-1 update of the inverse-Jacobian estimate B = −I + Σ uᵢvᵢᵀ:
    v = Bᵀ Δx, u = (Δx − B Δg) / (vᵀ Δg); the oldest pair is dropped
    first when the history is full."""
    h, nu = b["h"], b["nu"]
    slot = nu if nu < h else b["head"]
    if nu == h:
        b["U"][:, slot].zero_()
        b["V"][:, slot].zero_()
    U, V = b["U"][:, :h if nu == h else nu], b["V"][:, :h if nu == h else nu]
    v = -dx + torch.einsum("sk,skm->sm", torch.einsum("skm,sm->sk", U, dx), V)
    un = dx + dg - torch.einsum("sk,skm->sm",
                                torch.einsum("skm,sm->sk", V, dg), U)
    den = (v.double() * dg.double()).sum(1)
    if nu == h:
        b["head"] = (b["head"] + 1) % h
    inv = 1.0 / den
    ok = (den != 0) & torch.isfinite(den) & torch.isfinite(inv)
    if not bool(ok.any()):
        return
    sc = torch.where(ok, inv, torch.zeros_like(inv)).to(dx)
    b["U"][:, slot] = un * sc.to(un.device)[:, None]
    b["V"][:, slot] = v
    b["nu"] = min(nu + 1, h)


def _broyden(r, x):
    S, m = x.shape
    h = r.p.history
    b = {"U": x.new_zeros(S, h, m), "V": x.new_zeros(S, h, m),
         "h": h, "nu": 0, "head": 0}

    fx = r.eval(x)
    g = fx - x
    if r.check(x, _sq(g), _sq(fx)):
        return
    while r.st.iters < r.p.max_iter:
        U, V = b["U"][:, :b["nu"]], b["V"][:, :b["nu"]]
        dx = g - torch.einsum("sk,skm->sm",
                              torch.einsum("skm,sm->sk", V, g), U)
        dx = dx.masked_fill(r.frozen(x)[:, None], 0.0)
        x = x + dx
        fx = r.eval(x)
        gn = fx - x
        if r.check(x, _sq(gn), _sq(fx)) or r.st.iters >= r.p.max_iter:
            return
        dg = gn - g
        g = gn
        _broyden_update(b, dx, dg)


def _anderson_weights(gram, lam):
    """α (S, k) of the bordered system [[0, 1ᵀ], [1, H + λI]] [ν; α] =
    [1; 0] per sample (Walker & Ni 2011), float64; the uniform average
    where singular, as solvers.c does."""
    S, k, _ = gram.shape
    A = torch.zeros(S, k + 1, k + 1, dtype=torch.float64)
    A[:, 0, 1:] = 1
    A[:, 1:, 0] = 1
    A[:, 1:, 1:] = gram + lam * torch.eye(k, dtype=torch.float64)
    rhs = torch.zeros(S, k + 1, 1, dtype=torch.float64)
    rhs[:, 0] = 1
    sol, info = torch.linalg.solve_ex(A, rhs)
    alpha = sol[:, 1:, 0]
    bad = (info != 0) | ~torch.isfinite(alpha).all(1)
    return torch.where(bad[:, None], torch.full_like(alpha, 1.0 / k), alpha)


def _anderson(r, x):
    S, m = x.shape
    M = r.p.anderson_m
    X, G = x.new_zeros(S, M, m), x.new_zeros(S, M, m)
    gram = torch.zeros(S, M, M, dtype=torch.float64)

    k = 0
    while r.st.iters < r.p.max_iter:
        slot = k % M
        fx = r.eval(x)
        X[:, slot], G[:, slot] = x, fx - x
        if r.check(x, _sq(G[:, slot]), _sq(fx)) or \
                r.st.iters >= r.p.max_iter:
            return
        k += 1
        na = min(k, M)
        row = torch.einsum("sm,skm->sk", G[:, slot], G[:, :na]).double()
        gram[:, slot, :na] = row.cpu()
        gram[:, :na, slot] = row.cpu()
        a = _anderson_weights(gram[:, :na, :na], r.p.anderson_lambda)
        a = a.to(x)
        xn = torch.einsum("sk,skm->sm", a, X[:, :na]) + \
            r.p.anderson_beta * torch.einsum("sk,skm->sm", a, G[:, :na])
        x = torch.where(r.frozen(x)[:, None], X[:, slot], xn)


def solve(F, x0, p):
    """Solves x = F(x) from x0 (zeros, (S, m)) under torch.no_grad-free
    control of the caller; returns (lowest-residual iterate, Stats)."""
    r = _Run(F, p, x0)
    {"fixed_point": _fixed_point, "broyden": _broyden,
     "anderson": _anderson}[p.kind](r, x0)
    return r.finish()


def history_bytes(p, x):
    """Bytes of the solver's history and iterate tensors for x (S, m),
    counted as deqbench's solver memory formula counts them: broyden
    (6 + 2h)·n, anderson (3 + 2m)·n, fixed_point 4·n (n = x.numel();
    the S·h coefficients and torch's temporaries left out)."""
    n, e = x.numel(), x.element_size()
    k = {"broyden": 6 + 2 * p.history, "anderson": 3 + 2 * p.anderson_m,
         "fixed_point": 4}[p.kind]
    return k * n * e
