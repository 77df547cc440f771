"""compile=true with method=unroll: the whole training step as a GPU user
who compiles would write it (train.train hands over to train_steps).

The loss function (injection, the L block applications, head and loss,
under autocast with precision=bf16) goes through
torch.compile(mode="max-autotune", or DEQTORCH_COMPILE_MODE), which on
CUDA also records CUDA graphs (cudagraph trees); AOTAutograd compiles
its backward with it, and `loss.backward()` runs that. The step around
it stays eager and reads nothing back: torch.nn.utils.clip_grad_norm_
(foreach on CUDA) leaves the norm on the device, Adam is the fused
kernel on CUDA (train.adam), the loss and the norm are copied out of the
graphs' memory into a device buffer, and that buffer is read every
`every` steps (the progress interval, steps // 10) and at the end, when
divergence is checked. The batches go to the device `every` at a time
between those reads. Timed steps (after warmup_steps, which must cover
compilation, autotuning and the graphs' recording: MIN_WARMUP) are
timed by CUDA events (WallEvent on the CPU) read with the buffer; the
warmup steps by perf_counter after a synchronisation, their sum is the
record's compile.compile_s.

depth (the saved tensors) is counted by one eager forward and backward
of the first batch with memory.Tracker's hooks before the first step
(gradients dropped, no update, untimed; CUDA's peak statistics are reset
after it), since the compiled graphs save what they choose and the hooks
would slow the step."""
import math
import os
import sys
import time

import torch

from . import config, interrupt

# torch.compile's mode; DEQTORCH_COMPILE_MODE overrides it (max-autotune
# autotunes every GEMM shape: at the paper's width in bf16 on an H100 with
# torch 2.11 a smoke test's compile did not finish within its time limit,
# while reduce-overhead's took 38 s, the record's compile.compile_s)
MODES = ("max-autotune", "reduce-overhead", "max-autotune-no-cudagraphs",
         "default")
MODE = "max-autotune"


def mode():
    """DEQTORCH_COMPILE_MODE, or MODE; config.Unsupported when unknown."""
    m = os.environ.get("DEQTORCH_COMPILE_MODE", "") or MODE
    if m not in MODES:
        raise config.Unsupported(
            f"deqtorch: DEQTORCH_COMPILE_MODE={m} is not a torch.compile "
            f"mode; use one of {', '.join(MODES)} or unset it")
    return m
# cudagraph trees record a function on its 2nd or 3rd call: the first
# MIN_WARMUP steps are never timed (config.check_config refuses fewer)
MIN_WARMUP = config.COMPILE_MIN_WARMUP
DIVERGE_FACTOR = 10


class WallEvent:
    """The CPU's stand-in for torch.cuda.Event(enable_timing=True)."""

    def __init__(self):
        self.t = None

    def record(self):
        self.t = time.perf_counter()

    def elapsed_time(self, end):
        return (end.t - self.t) * 1e3


def _event(dev):
    if dev.type == "cuda":
        return torch.cuda.Event(enable_timing=True)
    return WallEvent()


def _sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


def mark_step():
    """torch.compiler.cudagraph_mark_step_begin() where torch has it: the
    previous step's graph outputs may be overwritten from here on."""
    f = getattr(getattr(torch, "compiler", None),
                "cudagraph_mark_step_begin", None)
    if f is not None:
        f()


class Step:
    """The compiled loss of a batch: fn(inp, tgt) -> loss."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.L, self.chunk = ctx.cfg["layers"], ctx.cfg["head_chunk"]
        self.bf16 = ctx.cfg.get("precision") == "bf16"
        self.devtype = ctx.dev.type
        self.mode = mode()
        self.fn = torch.compile(self.loss, mode=self.mode)

    def loss(self, inp, tgt):
        """Ctx.loss's operations for unroll, in one function."""
        if self.bf16:
            with torch.autocast(device_type=self.devtype,
                                dtype=torch.bfloat16):
                return self._loss(inp, tgt)
        return self._loss(inp, tgt)

    def _loss(self, inp, tgt):
        m = self.ctx.model
        u = m.inject_u(inp)
        z = m.z0(u)
        for _ in range(self.L):
            z = m._block(z, u)
        return m.head_loss(z, tgt, self.chunk)[0]


def clip_norm(params, clip, dev):
    """The global gradient norm as a device tensor, the gradients scaled
    by clip / norm when above clip > 0 (torch's clip_grad_norm_, whose
    scale is clip / (norm + 1e-6), capped at 1)."""
    if clip > 0:
        kw = {"foreach": True} if dev.type == "cuda" else {}
        return torch.nn.utils.clip_grad_norm_(params, clip, **kw)
    gs = [p.grad for p in params if p.grad is not None]
    return torch.linalg.vector_norm(
        torch.stack([torch.linalg.vector_norm(g) for g in gs]))


def _probe_depth(ctx, tok):
    """memory.Tracker's depth from one eager forward and backward of tok
    (the hooks on), then nothing of it kept."""
    evals = ctx.model.evals
    ctx.track = True
    loss, _ = ctx.loss(tok, True)
    loss.backward()
    ctx.opt.zero_grad(set_to_none=True)
    ctx.method.end_step()
    ctx.track = False
    ctx.model.evals = evals
    del loss
    if ctx.dev.type == "cuda":
        torch.cuda.synchronize()
        if hasattr(torch.cuda, "reset_peak_memory_stats"):
            torch.cuda.reset_peak_memory_stats()


def _upload(batcher, n, dev):
    """The next n batches, one (n, B, T+1) device tensor."""
    import numpy as np
    return torch.as_tensor(np.stack([batcher.next_batch()
                                     for _ in range(n)]), device=dev)


class Run:
    """State of the compiled training loop."""

    def __init__(self, ctx, log):
        self.ctx, self.log, cfg = ctx, log, ctx.cfg
        self.steps, self.W = cfg["steps"], config.resolved_warmup(cfg)
        self.every = max(1, self.steps // 10)
        self.buf = torch.zeros(self.steps, 2, dtype=torch.float64,
                               device=ctx.dev)
        self.pend = []  # events of timed steps not yet read
        self.read = 0  # steps whose loss and norm were read
        self.compile_s = 0.0
        self.limit = DIVERGE_FACTOR * math.log(ctx.V)

    def step(self, s, tok, lr):
        """Training step s (1-based) on tok, nothing read back."""
        ctx, log, dev = self.ctx, self.log, self.ctx.dev
        for g in ctx.opt.param_groups:
            g["lr"] = lr
        timed = s > self.W
        if timed:
            ev = [_event(dev) for _ in range(3)]
            ev[0].record()
        else:
            _sync(dev)
            t = [time.perf_counter()]
        ctx.opt.zero_grad(set_to_none=True)
        inp, tgt = tok[:, :-1].contiguous(), tok[:, 1:].contiguous()
        mark_step()
        loss = ctx.step.fn(inp, tgt)
        self.buf[s - 1, 0] = loss.detach()  # out of the graphs' memory
        if timed:
            ev[1].record()
        else:
            _sync(dev)
            t.append(time.perf_counter())
        loss.backward()
        del loss
        self.buf[s - 1, 1] = clip_norm(ctx.params, ctx.cfg["clip"], dev)
        ctx.opt.step()
        if timed:
            ev[2].record()
            self.pend.append(ev)
        else:
            _sync(dev)
            t.append(time.perf_counter())
            self.compile_s += t[2] - t[0]
            log.fwd_ms.append((t[1] - t[0]) * 1e3)
            log.bwd_ms.append((t[2] - t[1]) * 1e3)
            log.ms.append((t[2] - t[0]) * 1e3)
        L = ctx.cfg["layers"]
        ctx.model.evals += L
        log.lr.append(lr)
        log.fwd.append(None)
        log.bwd.append(None)
        log.f_ev.append(L)
        log.v_ev.append(L)
        log.jac.append(None)

    def flush(self, s):
        """Reads steps read+1..s back; False when one of them diverged
        (log.status and message say which)."""
        log, a = self.log, self.read
        _sync(self.ctx.dev)
        for ev in self.pend:
            log.fwd_ms.append(ev[0].elapsed_time(ev[1]))
            log.bwd_ms.append(ev[1].elapsed_time(ev[2]))
            log.ms.append(ev[0].elapsed_time(ev[2]))
        self.pend = []
        vals = self.buf[a:s].tolist()
        self.read = s
        ran = (f"; steps {a + 1}..{s} ran before it was read (the compiled "
               f"step reads losses every {self.every} steps)")
        for i, (lv, gn) in enumerate(vals, start=a + 1):
            log.loss.append(lv)
            if not (math.isfinite(lv) and lv <= self.limit):
                log.status = "diverged"
                log.message = (
                    f"loss became {lv:g} at step {i}; the limit is "
                    f"{self.limit:.4g} nats ({DIVERGE_FACTOR} ln V, V = "
                    f"{self.ctx.V}){ran}; lower lr or set clip")
                return False
            log.gnorm.append(gn)
            if not math.isfinite(gn):
                log.status = "diverged"
                log.message = (f"gradient norm became {gn:g} at step {i}"
                               f"{ran}; lower lr or raise clip")
                return False
            log.ok_steps = i
        return True


def train_steps(ctx, batcher, log, lr_at):
    """The training loop of compile=true with method=unroll; fills log
    (progress on stderr at each read) and ctx.compile_s."""
    cfg, run = ctx.cfg, Run(ctx, log)
    steps, every = run.steps, run.every
    chunk = None
    for s in range(1, steps + 1):
        if (s - 1) % every == 0:
            chunk = _upload(batcher, min(every, steps - s + 1), ctx.dev)
        tok = chunk[(s - 1) % every]
        if s == 1:
            _probe_depth(ctx, tok)
        run.step(s, tok, lr_at(cfg, s))
        stop = interrupt.first()  # bench/run/train_step.c interrupted()
        if s % every == 0 or s == steps or stop:
            if not run.flush(s):
                break
            print(f"deqtorch: {cfg['method']} step {s}/{steps} "
                  f"loss {log.loss[-1]:.4f}", file=sys.stderr, flush=True)
        if stop:
            log.status = "interrupted"
            log.message = (f"interrupted by {interrupt.name()} after step "
                           f"{s} of {steps}")
            break
    ctx.compile_s = run.compile_s


def dynamo_counts():
    """The compile object's counts from torch._dynamo's counters:
    graphs (stats.unique_graphs), graph_breaks (graph_break summed, its
    first three reasons in break_reasons), recompiles (recompiles summed)
    and cudagraph_skips (inductor.cudagraph_skips: compiled graphs that
    ran without CUDA graphs; the reasons are torch's perf-hint warnings on
    stderr); all None (reasons empty) where torch has no torch._dynamo."""
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return {"graphs": None, "graph_breaks": None, "recompiles": None,
                "cudagraph_skips": None, "break_reasons": []}
    breaks = dict(counters.get("graph_break", {}))
    rec = dict(counters.get("recompiles", {}))
    return {"graphs": int(counters.get("stats", {}).get("unique_graphs",
                                                         0)),
            "graph_breaks": int(sum(breaks.values())),
            "recompiles": int(sum(rec.values())),
            "cudagraph_skips": int(counters.get("inductor", {}).get(
                "cudagraph_skips", 0)),
            "break_reasons": [str(k).splitlines()[0][:160]
                              for k in list(breaks)[:3]]}


def unsupported(e):
    """config.Unsupported of torch.compile's refusal e."""
    return config.Unsupported(
        f"deqtorch: compile=true is not supported by impl=pytorch here; "
        f"torch.compile: {str(e).splitlines()[0] if str(e) else e!r}; "
        f"drop compile")
