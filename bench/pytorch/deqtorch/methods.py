"""unroll, checkpoint and deq on an LM (models.py), as deqbench's methods
(docs/ARCHITECTURE.md §Methods). forward(u, train) returns z; with train
the graph is kept so that loss.backward() differentiates it (deq's IFT
backward is a gradient hook on z). Statistics of the last step are in
`last`: fwd/bwd solver Stats (or None) and VJPs taken.

precision=bf16: forward runs under autocast (train.Ctx.loss); what runs
again in the backward outside it (revolve's recomputations) enters
`amp()`, the same autocast (torch.utils.checkpoint restores it itself).
deq's solvers stay float32: the block's output is cast to the state's
dtype (the weights', float32) before it enters the solver arithmetic,
and the IFT backward solves in float32 on float32 VJPs."""
import contextlib
import functools
import math
import re
import time

import torch
from torch.utils.checkpoint import checkpoint

try:  # torch >= 2.4: selective activation checkpointing
    from torch.utils.checkpoint import (CheckpointPolicy,
                                        create_selective_checkpoint_contexts)
except ImportError:  # torch < 2.4 (Debian's 1.13)
    CheckpointPolicy = create_selective_checkpoint_contexts = None

from . import memory, rng, solvers


@contextlib.contextmanager
def untaped():
    """torch.no_grad() for block applications without a tape (deq's
    solves, revolve's advances), with autocast's weight-cast cache off:
    a cast made without grad has no graph to the weight, and autocast
    would hand that cached copy to the taped applications after it in the
    same autocast region, cutting the weights' gradients (bf16; a no-op
    for the arithmetic otherwise)."""
    prev = torch.is_autocast_cache_enabled()
    torch.set_autocast_cache_enabled(False)
    try:
        with torch.no_grad():
            yield
    finally:
        torch.set_autocast_cache_enabled(prev)


def resolve(cfg):
    """deqbench's derived values: k = 0 -> round(sqrt(L)), histories 0 ->
    the caps (method_config_resolve)."""
    c = dict(cfg)
    if c["k"] == 0:
        c["k"] = int(math.floor(math.sqrt(c["layers"]) + 0.5))
    if c["f_history"] == 0:
        c["f_history"] = c["f_max_iter"]
    if c["b_history"] == 0:
        c["b_history"] = c["b_max_iter"]
    return c


class Method:
    def __init__(self, model, cfg, tracker):
        self.m, self.cfg, self.tr = model, resolve(cfg), tracker
        self.last = {"fwd": None, "bwd": None, "vjps": 0}
        self.held = []
        self.jac = None  # γ R of this training step (a graph), or None
        self.jac_r = None  # R of this training step (a float), or None
        self.rng = rng.SplitMix64(cfg["seed"])  # method_seed
        # the forward's autocast context (train.Ctx sets it; bf16)
        self.amp = contextlib.nullcontext

    def end_step(self):
        """After the backward: drops what the forward held."""
        self.held = []
        self.jac = None

    def objective(self, loss):
        """What the training backward differentiates: the loss, plus the
        Jacobian regulariser γ R when this step drew it."""
        return loss if self.jac is None else loss + self.jac


class Unroll(Method):
    """L applications of the block from z0 (compile=true runs the whole
    step instead: compiled.Step)."""

    def forward(self, u, train):
        L = self.cfg["layers"]
        z = self.m.z0(u)
        for _ in range(L):
            z = self.m.f(z, u)
        self.last["vjps"] = L if train else 0
        return z


class Offload(Unroll):
    """offload (methods/offload.c; vDNN, Rhu et al. 2016): unroll with what
    autograd saves kept in host memory: each saved tensor is copied to the
    host when saved and back when the backward needs it (saved-tensor
    hooks, the idea of torch.autograd.graph.save_on_cpu), parameters left
    in place. On the CPU both copies are clones in line (deqbench's
    accounting model of host memory, `memmove` there); on a GPU blocking
    copies to page-locked memory. Unlike deqbench's, no two-tape device
    window and no copy stream: nothing overlaps. `copies` has the bytes
    and seconds of each step's copies."""

    def __init__(self, model, cfg, tracker):
        super().__init__(model, cfg, tracker)
        self.copies, self._bytes, self._s = [], 0, 0.0

    def forward(self, u, train):
        if not train:
            return super().forward(u, train)
        self._bytes, self._s = 0, 0.0
        with torch.autograd.graph.saved_tensors_hooks(self._pack,
                                                      self._unpack):
            return super().forward(u, train)

    def _copy(self, t, device):
        t0 = time.perf_counter()
        if device.type == "cuda":
            out = t.to(device)
            torch.cuda.synchronize()
        elif t.device.type == "cuda":
            out = t.to("cpu", copy=True).pin_memory()
            torch.cuda.synchronize()
        else:
            out = t.clone()
        self._s += time.perf_counter() - t0
        self._bytes += t.numel() * t.element_size()
        return out

    def _pack(self, t):
        # parameters, and autocast's bf16 copies of them, stay in place;
        # so do torch.compile's fake tensors while it traces
        if (type(t) not in memory.PLAIN or self.tr.is_param(t)
                or self.tr.is_param_cast(t)):
            return t
        return memory.HostHeld(self._copy(t, torch.device("cpu")),
                               t.device, self.tr)

    def _unpack(self, h):
        if not isinstance(h, memory.HostHeld):
            return h
        return self._copy(h.t, h.device)

    def end_step(self):
        super().end_step()
        self.copies.append((self._bytes, self._s * 1e3))


class Checkpoint(Method):
    """Segments of k layers; every segment but the last under
    torch.utils.checkpoint (non-reentrant), which keeps its input and
    recomputes its tapes in the backward."""

    def _segment(self, n):
        def run(z, u):
            for _ in range(n):
                z = self.m.f(z, u)
            return z
        return run

    def forward(self, u, train):
        L, k = self.cfg["layers"], self.cfg["k"]
        z = self.m.z0(u)
        starts = list(range(0, L, k))
        for i, s in enumerate(starts):
            n = min(k, L - s)
            if train and i < len(starts) - 1:
                self.held.append(self.tr.hold(z))
                z = checkpoint(self._segment(n), z, u, use_reentrant=False)
            else:
                z = self._segment(n)(z, u)
        self.last["vjps"] = L if train else 0
        return z


def sac_available(version):
    """True for a torch version >= 2.4, whose torch.utils.checkpoint has
    selective activation checkpointing (create_selective_checkpoint_contexts,
    CheckpointPolicy)."""
    m = re.match(r"(\d+)\.(\d+)", version or "")
    return bool(m) and (int(m.group(1)), int(m.group(2))) >= (2, 4)


# The aten ops (overload packets, by name) of the attention core that
# method=selective recomputes under torch's selective checkpointing: the
# scores' GEMM and the probabilities' (bmm), the scale (mul), the causal
# mask (ones, triu, masked_fill), the float32 cast of the scores (and
# autocast's weight casts: _to_copy, cheap), the softmax, the fused
# attention kernels of scaled_dot_product_attention; and the view-like
# ops, free to replay (matmul's reshapes of q, kᵀ and v, its clone of a
# non-contiguous operand included). Every other op's output (the block's
# Linear GEMMs, adds, relu, LayerNorms) is saved.
SAC_RECOMPUTE = frozenset((
    "bmm", "mul", "ones", "triu", "masked_fill", "_to_copy", "_softmax",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_attention_math",
    "view", "_unsafe_view", "_reshape_alias", "expand", "clone",
    "transpose", "t", "permute", "split", "split_with_sizes", "slice",
    "select", "unsqueeze", "squeeze", "alias", "detach"))


def sac_recomputes(op):
    """True when method=selective recomputes the aten op (an OpOverload)
    rather than saving its output; an op without an overload packet
    (not aten's) is saved."""
    packet = getattr(op, "overloadpacket", None)
    return getattr(packet, "__name__", None) in SAC_RECOMPUTE


def sac_policy(ctx, op, *args, **kwargs):
    """create_selective_checkpoint_contexts' policy: the attention core
    recomputed, everything else saved."""
    return (CheckpointPolicy.PREFER_RECOMPUTE if sac_recomputes(op)
            else CheckpointPolicy.MUST_SAVE)


class Selective(Unroll):
    """selective (methods/selective.c; Megatron-LM's selective activation
    recomputation, Korthikanti et al. 2022): unroll whose tapes leave out
    the attention probabilities (torch >= 2.4: and the attention output),
    recomputed from q, k, v in each layer's backward. torch >= 2.4: each block application under
    torch.utils.checkpoint (non-reentrant) with
    create_selective_checkpoint_contexts(sac_policy), which keeps every
    op's output but the attention core's (SAC_RECOMPUTE) and replays the
    core in the backward; older torch: the attention core alone
    (_TransformerBlock.attend) under torch.utils.checkpoint, which keeps
    q, k, v (one storage: counted in depth by `hold`) and recomputes the
    core's tapes in the backward. Either way L block applications, L
    VJPs, on unroll's values. model=transformer only (config.check_config
    refuses the others, as deqbench does)."""

    def __init__(self, model, cfg, tracker):
        super().__init__(model, cfg, tracker)
        self.sac = sac_available(torch.__version__)

    def _core(self, attend, q, k, v):
        self.held.append(self.tr.hold(q))  # q, k, v: views of one storage
        return checkpoint(attend, q, k, v, use_reentrant=False)

    def forward(self, u, train):
        if not train:
            return super().forward(u, train)
        L, m = self.cfg["layers"], self.m
        z = m.z0(u)
        if self.sac:
            ctx_fn = functools.partial(create_selective_checkpoint_contexts,
                                       sac_policy)
            for _ in range(L):
                # checkpoint keeps the block's input by reference; the
                # saved op outputs are in its cache, not seen by the hooks
                self.held.append(self.tr.hold(z))
                m.evals += 1  # the replay in the backward is not counted
                z = checkpoint(m._block, z, u, use_reentrant=False,
                               context_fn=ctx_fn)
        else:
            m.block.core = self._core
            try:
                for _ in range(L):
                    z = m.f(z, u)
            finally:
                m.block.core = None
        self.last["vjps"] = L
        return z


def revolve_slots(c):
    """The resolved slots: 0 -> max(1, round(log2 L)) (revolve.c)."""
    if c["slots"] > 0:
        return c["slots"]
    return max(1, int(math.floor(math.log2(c["layers"]) + 0.5)))


@functools.lru_cache(maxsize=8)
def _revolve_table(L, S):
    """cost[s][n], split[s][n] for n <= L, s <= S (revolve_cost), bottom
    up: O(S L²)."""
    cost = [[n * (n - 1) // 2 for n in range(L + 1)]]
    split = [[0] * (L + 1)]
    for s in range(1, S + 1):
        c, k_of = [0] * (L + 1), [0] * (L + 1)
        for n in range(2, L + 1):
            c[n], k_of[n] = min((k + cost[s - 1][n - k] + c[k], k)
                                for k in range(1, n))
        cost.append(c)
        split.append(k_of)
    return cost, split


def revolve_cost(n, s):
    """(untaped advances, first split) to reverse n layers from a stored
    state with s free slots, one tape (Griewank's treeverse): a split k
    advances k layers, stores that state, reverses the n − k above it with
    s − 1 slots, then the k below with s; without slots every layer is
    recomputed from the bottom. The minimum over k is A(n, s) of
    methods/revolve_schedule.h (tested)."""
    cost, split = _revolve_table(n, s)
    return cost[s][n], split[s][n]


class _RevolveFn(torch.autograd.Function):
    """Binomial checkpointing of run.L layers on u: forward advances
    untaped storing the states of the schedule's first descent and tapes
    the last layer; backward reverses layers L−1 … 0 (Revolve._reverse).
    Inputs: the Revolve method, u, then the block's parameters."""

    @staticmethod
    def forward(ctx, run, u, *params):
        ctx.run = run
        return run._forward(u)

    @staticmethod
    def backward(ctx, g):
        run = ctx.run
        ctx.run = None
        du, dp = run._backward(g)
        return (None, du, *dp)


class Revolve(Method):
    """revolve (methods/revolve.c): one tape and s stored states, the
    block applications of the optimal binomial schedule (L + A(L, s)
    forward evaluations, L VJPs), on unroll's values in unroll's VJP
    order."""

    def forward(self, u, train):
        L = self.cfg["layers"]
        if not train:
            z = self.m.z0(u)
            for _ in range(L):
                z = self.m.f(z, u)
            return z
        self.L, self.s = L, revolve_slots(self.cfg)
        self.split = _revolve_table(L, self.s)[1]  # [s][n]: first split
        self.params = [p for n, p in self.m.named_parameters()
                       if n.startswith(("block.", "cell."))]
        self.last["vjps"] = L
        return _RevolveFn.apply(self, u, *self.params)

    def _advance(self, z, a, b):
        """z_b from z_a (untaped)."""
        with untaped():
            for _ in range(a, b):
                z = self.m.f(z, self.ud)
        return z

    def _forward(self, u):
        """The first descent: advance 0 → L−1 storing the split states,
        then layer L−1 with its tape (kept for the first VJP)."""
        self.ud = u.detach()
        self.stored = {}
        a, n, s = 0, self.L, self.s
        z = self.m.z0(self.ud)
        while n > 1 and s > 0:
            k = self.split[s][n]
            z = self._advance(z, a, a + k)
            self.stored[a + k] = z
            self.held.append(self.tr.hold(z))
            a, n, s = a + k, n - k, s - 1
        z = self._advance(z, a, self.L - 1)
        self.top = self._tape(z)
        return self.top[2].detach()

    def _tape(self, z):
        """(z leaf, u leaf, f(z; u)) with the graph."""
        with torch.enable_grad():
            zl = z.detach().requires_grad_()
            ul = self.ud.detach().requires_grad_()
            return zl, ul, self.m.f(zl, ul)

    def _vjp(self, tape, g):
        """ḡ J_f for z and u, parameter gradients += (run's sums)."""
        zl, ul, out = tape
        gs = torch.autograd.grad(out, [zl, ul] + self.params, g,
                                 allow_unused=True)
        self.du = gs[1] if self.du is None else self.du + gs[1]
        for i, gp in enumerate(gs[2:]):
            if gp is not None:
                self.dp[i] = gp if self.dp[i] is None else self.dp[i] + gp
        return gs[0]

    def _reverse(self, a, b, s, za, g):
        """The cotangent at z_a from the one at z_b, layers b−1 … a."""
        n = b - a
        if n == 1 or s == 0:
            for i in range(b - 1, a - 1, -1):
                if i == self.L - 1:
                    tape, self.top = self.top, None
                else:
                    tape = self._tape(self._advance(za, a, i))
                g = self._vjp(tape, g)
            return g
        k = self.split[s][n]
        zm = self.stored.pop(a + k, None)
        if zm is None:
            zm = self._advance(za, a, a + k)
        g = self._reverse(a + k, b, s - 1, zm, g)
        del zm
        return self._reverse(a, a + k, s, za, g)

    def _backward(self, g):
        self.du, self.dp = None, [None] * len(self.params)
        with torch.no_grad():
            z0 = self.m.z0(self.ud)
        with self.amp():  # the recomputations as the forward ran
            self._reverse(0, self.L, self.s, z0, g)
        du, dp = self.du, self.dp
        self.du = self.dp = self.stored = self.top = None
        return du, dp


def solver_params(c, bwd):
    p = "b_" if bwd else "f_"
    return solvers.Params(
        kind=c[p + "solver"], tol=c[p + "tol"], max_iter=c[p + "max_iter"],
        stop=c[p + "stop_mode"], history=c[p + "history"],
        anderson_m=c["anderson_m"], anderson_lambda=c["anderson_lambda"],
        anderson_beta=c["anderson_beta"], scope=c[p + "stop_scope"],
        protect=c["protect_thres"], stall=c["stall_window"])


class Deq(Method):
    """Forward: solve z* = f(z*; u) from 0 without a graph, then z = f(z*)
    (ift, jfb) or k damped phantom steps. Backward (ift): a hook on z
    solves y = y J_f(z*) + ḡ with b_solver by VJPs and hands y on."""

    def _samples(self, z):
        return z.shape[0] if self.cfg["solver_batching"] == "per_sample" \
            else 1

    def _solve(self, F, like, bwd):
        p = solver_params(self.cfg, bwd)
        S = self._samples(like)
        x0 = like.new_zeros(S, like.numel() // S)
        nb = solvers.history_bytes(p, x0)
        self.tr.solver_alloc(nb)
        try:
            x, st = solvers.solve(F, x0, p)
        finally:
            self.tr.solver_free(nb)
        return x.view(like.shape), st

    def forward(self, u, train):
        c, m = self.cfg, self.m
        ud = u.detach()
        z0 = m.z0(u)
        # the solver's arithmetic in z0's dtype (the weights'): under bf16
        # autocast f's bfloat16 output is cast to float32 first
        with untaped():
            zs, self.last["fwd"] = self._solve(
                lambda x: m.f(x.view(z0.shape), ud).reshape(x.shape)
                .to(x.dtype), z0, 0)
        self.last["bwd"] = None
        self.jac = self.jac_r = None
        if (train and c["jac_loss_weight"] > 0
                and self.rng.u01(1)[0] < c["jac_loss_freq"]):
            r = self._jac_reg(zs, u)
            self.jac_r = float(r.detach())
            self.jac = c["jac_loss_weight"] * r
        if c["b_mode"] == "phantom":
            z, lam = zs, c["phantom_tau"]
            for _ in range(c["phantom_steps"]):
                fz = m.f(z, u)
                z = fz if lam == 1.0 else lam * fz + (1 - lam) * z
            self.last["vjps"] = c["phantom_steps"] if train else 0
            return z
        if not train:
            self.eval_at = (zs, ud)
            return m.f(zs, u)
        if c["b_mode"] == "jfb":
            self.last["vjps"] = 1
            return m.f(zs, u)
        zin = zs.clone().requires_grad_()
        z = m.f(zin, u)
        out = z.view_as(z)  # the hook's tensor; the solver's VJPs use z
        out.register_hook(lambda g: self._ift(g, z, zin))
        return out

    def _deq_layout(self, x, like):
        """x (flat, deqbench's state order: state_parts planar blocks) in
        like's layout (each position's parts side by side)."""
        B, T, P = like.shape[0], like.shape[1], self.m.state_parts
        x = torch.as_tensor(x, dtype=like.dtype, device=like.device)
        return x.view(P, B, T, -1).permute(1, 2, 0, 3).reshape(like.shape)

    def spectral_radius(self):
        """ρ(J_f(z*)) at the last evaluation forward's fixed point by
        spectral_radius_iters power iterations on VJPs, v ← vJ/‖vJ‖ from a
        Gaussian v drawn as deqbench draws it (methods/deq.c
        method_spectral_radius): the last ‖vJ‖, None if not finite."""
        t = self.cfg["spectral_radius_iters"]
        if t <= 0 or getattr(self, "eval_at", None) is None:
            return None
        zs, ud = self.eval_at
        with torch.enable_grad():
            zin = zs.detach().requires_grad_()
            fz = self.m.f(zin, ud, eager=True)
            v = self._deq_layout(self.rng.gaussian(fz.numel()), fz)
            v = v / v.double().norm().to(v.dtype)
            r = math.nan
            for _ in range(t):
                (w,) = torch.autograd.grad(fz, zin, v, retain_graph=True)
                r = float(w.double().norm())
                if not (r > 0) or not math.isfinite(r):
                    break
                v = w / r
        return r if math.isfinite(r) else None

    def _jac_reg(self, zs, u):
        """R = ‖εᵀ J_f(z*)‖² / n (Bai, Koltun, Kolter 2021; torchdeq's
        jac_reg normalisation; docs/methods.md §Jacobian regularisation) with one
        Gaussian probe ε drawn as deqbench draws it, z* constant, as a
        graph through f's parameters and u: autograd's double backward
        where deqbench takes a central difference of VJPs. Costs one
        forward and a VJP with its own backward (counted as 2 VJPs)."""
        zin = zs.detach().clone().requires_grad_()
        fz = self.m.f(zin, u, eager=True)  # double backward: not compiled
        eps = self._deq_layout(self.rng.gaussian(fz.numel()), fz)
        (w,) = torch.autograd.grad(fz, zin, eps, create_graph=True)
        return w.pow(2).sum() / w.numel()

    def _ift(self, g, z, zin):
        """y = y J + g by b_solver, J = ∂f/∂z at z*; VJPs of z's graph.
        The solve is in zin's dtype (float32 under bf16: g and the VJPs,
        which are zin's, are cast to it); y goes on in g's dtype."""
        shape = g.shape
        gs = g.to(zin.dtype)

        def F(y):
            (v,) = torch.autograd.grad(z, zin, y.view(shape).to(z.dtype),
                                       retain_graph=True)
            return v.reshape(y.shape) + gs.reshape(y.shape)
        with torch.no_grad():
            y, self.last["bwd"] = self._solve(F, gs, 1)
        self.last["vjps"] = self.last["bwd"].iters + 1
        return y.to(g.dtype)


def create(model, cfg, tracker):
    """The method object of cfg['method'] (unroll, checkpoint, deq,
    revolve, offload, selective)."""
    return {"unroll": Unroll, "checkpoint": Checkpoint, "deq": Deq,
            "revolve": Revolve, "offload": Offload,
            "selective": Selective}[cfg["method"]](model, cfg, tracker)
