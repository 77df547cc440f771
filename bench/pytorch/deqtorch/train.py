"""One training run as deqbench's runner does it (docs/ARCHITECTURE.md
§Data flow): Adam (0.9, 0.999, 1e-8, no decay), linear warmup then
half-cosine learning rate, global grad-norm clip, divergence at a loss
above 10 ln V or not finite, warmup steps untimed, then the valid and
test evaluation over whole batches.

precision=bf16: autocast(bfloat16) around the forward of training and
evaluation (injection, block applications, head and loss: Ctx.loss); the
weights, their gradients, Adam's moments, the clipping and the update
stay float32 outside it; no GradScaler (bfloat16 has float32's exponent
range). precision=tf32: TF32 matmuls and cuDNN convolutions on CUDA.
compile=true (torch >= 2): with unroll the whole step, compiled with
mode="max-autotune" and run by compiled.train_steps (no host read but
every progress interval, CUDA-event timing); the other methods' block
through torch.compile (default mode) in this loop; Adam fused on CUDA
(Ctx._compile, adam)."""
import contextlib
import math
import sys
import time

import torch

from . import (compiled, config, data, init, interrupt, memory, methods,
               models)

DIVERGE_FACTOR = compiled.DIVERGE_FACTOR


def lr_at(cfg, step):
    """Learning rate of 1-based step (bench/run/train_step.c lr_at)."""
    w, lr = cfg["lr_warmup"], cfg["lr"]
    if w > 0 and step <= w:
        return lr * step / w
    if cfg["steps"] <= w:
        return lr
    p = (step - 1 - w) / (cfg["steps"] - w)
    return lr * 0.5 * (1 + math.cos(math.pi * p))


def device_of(cfg):
    """(torch.device, dtype) of the `device` key."""
    if cfg["device"] == "cuda":
        return torch.device("cuda"), torch.float32
    dt = torch.float64 if cfg["device"] == "cpu64" else torch.float32
    return torch.device("cpu"), dt


class Clock:
    """Step marks: perf_counter, after a CUDA synchronisation on a GPU."""

    def __init__(self, dev):
        self.cuda = dev.type == "cuda"

    def now(self):
        if self.cuda:
            torch.cuda.synchronize()
        return time.perf_counter()


class Ctx:
    """Model, method, optimizer and memory tracker of one run."""

    def __init__(self, cfg, V, init_params=None):
        self.cfg, self.V = cfg, V
        self.dev, self.dtype = device_of(cfg)
        if self.dev.type == "cuda":
            tf32 = bool(cfg["tf32"]) or cfg.get("precision") == "tf32"
            torch.backends.cuda.matmul.allow_tf32 = tf32
            torch.backends.cudnn.allow_tf32 = tf32
        self.model = models.build(cfg, V, self.dtype, self.dev)
        if init_params:
            init.load(self.model, init_params)
        elif cfg.get("params"):
            init.load(self.model, cfg["params"])
        else:
            init.seeded(self.model, cfg)
        self.params = list(self.model.parameters())
        self.tracker = memory.Tracker(self.params)
        self.track = True  # count saved tensors (tracks(): not every step)
        self.method = methods.create(self.model, cfg, self.tracker)
        # deq with pretrain_steps: an unroll of pretrain_layers for the
        # first steps (bench/run/pretrain.c); `active` is the one in use
        self.pre = None
        if cfg["method"] == "deq" and cfg.get("pretrain_steps", 0) > 0:
            self.pre = methods.create(
                self.model, dict(cfg, method="unroll",
                                 layers=cfg["pretrain_layers"]),
                self.tracker)
        self.active = self.method
        for m in (self.method, self.pre):
            if m is not None:
                m.amp = self.autocast
        self.step = None  # compile=true, unroll: compiled.Step
        self.compile_s = None  # its warmup steps' wall seconds
        if cfg.get("compile", False):
            self._compile()
        self.clock = Clock(self.dev)

    def _compile(self):
        """compile=true (torch >= 2): what a GPU user hands to
        torch.compile. unroll: the whole step's loss (compiled.Step,
        mode="max-autotune": CUDA graphs on CUDA; train runs it by
        compiled.train_steps); every other method: the block (default
        mode), since their Python control flow (solver loops, checkpoint
        and offload hooks, revolve's schedule) is not one graph."""
        if not hasattr(torch, "compile"):
            raise config.Unsupported(
                f"deqtorch: compile=true needs torch >= 2 (this is "
                f"torch {torch.__version__}); drop compile")
        try:
            if self.cfg["method"] == "unroll":
                self.step = compiled.Step(self)
            else:
                self.model.compile_block()
        except RuntimeError as e:  # e.g. torch 2.0 on Python 3.11
            raise compiled.unsupported(e) from e

    def autocast(self):
        """The forward's precision context (autocast bf16, or nothing)."""
        return models.autocast(self.cfg, self.dev.type)

    def batch(self, tok):
        t = torch.as_tensor(tok, device=self.dev)
        return t[:, :-1], t[:, 1:]

    def loss(self, tok, train):
        """Forward of batch tok (B, T+1): (loss tensor, logits)."""
        inp, tgt = self.batch(tok)
        with self.autocast():
            u = self.model.inject_u(inp)
            with (self.tracker.hooks() if self.track
                  else contextlib.nullcontext()):
                z = self.active.forward(u, train)
            return self.model.head_loss(z, tgt, self.cfg["head_chunk"])


def grad_norm_clip(params, clip):
    """Global l2 norm of the gradients (float64); scaled by clip/norm when
    above clip > 0 (bench/run/train_step.c optimizer_step)."""
    gs = [p.grad for p in params if p.grad is not None]
    # the per-parameter sums come back together (one host read, not one
    # per parameter) and are added on the host in parameter order
    sums = torch.stack([g.double().pow(2).sum() for g in gs]).tolist() \
        if gs else []
    gn = math.sqrt(sum(sums))
    if clip > 0 and gn > clip:
        torch._foreach_mul_(gs, clip / gn)  # g.mul_ on each, one launch
    return gn


def adam(ctx):
    """Adam (0.9, 0.999, 1e-8, no decay) over ctx.params: with compile=true
    on CUDA the fused kernel (fused=True, torch >= 2), the optimizer a GPU
    user who compiles picks; else PyTorch's default implementation."""
    cfg = ctx.cfg
    fused = bool(cfg.get("compile", False)) and ctx.dev.type == "cuda"
    kw = {"fused": True} if fused else {}
    return torch.optim.Adam(ctx.params, lr=cfg["lr"], betas=(0.9, 0.999),
                            eps=1e-8, weight_decay=0.0, **kw)


class Log:
    """Per-step figures (bench/run/step_log.c)."""

    def __init__(self):
        self.loss, self.ms, self.fwd_ms, self.bwd_ms = [], [], [], []
        self.fwd, self.bwd, self.f_ev, self.v_ev = [], [], [], []
        self.gnorm, self.lr = [], []
        self.jac = []  # R per step, None where not applied
        self.ok_steps = 0
        self.p0 = 0  # pretraining steps done (bench/run/pretrain.c)
        self.pre_depth = 0  # depth peak over the pretraining steps
        self.status, self.message = "ok", ""


def tracks(cfg, s):
    """Whether training step s counts saved tensors (memory.Tracker's
    hooks, a Python call per tensor autograd saves): the untimed warmup
    steps (step 1 at least), the pretraining steps, and every step when
    the Jacobian regulariser may apply. The other steps save the same
    tensors and run without the hooks, as a PyTorch user's would: their
    times are not the instrumentation's."""
    return (s <= max(cfg["warmup_steps"], 1)
            or s <= cfg.get("pretrain_steps", 0)
            or cfg.get("jac_loss_weight", 0) > 0)


def _step(ctx, opt, tok, s, log):
    """Training step s; returns False when the run diverged."""
    cfg, m = ctx.cfg, ctx.model
    ctx.track = tracks(cfg, s)
    ctx.active = ctx.pre if ctx.pre and s <= cfg["pretrain_steps"] \
        else ctx.method
    method = ctx.active
    lr = lr_at(cfg, s)
    for g in opt.param_groups:
        g["lr"] = lr
    ev0 = m.evals
    t0 = ctx.clock.now()
    opt.zero_grad(set_to_none=True)
    loss, _ = ctx.loss(tok, True)
    lv = float(loss)
    t1 = ctx.clock.now()
    log.loss.append(lv)
    limit = DIVERGE_FACTOR * math.log(ctx.V)
    if not (math.isfinite(lv) and lv <= limit):
        log.status = "diverged"
        log.message = (f"loss became {lv:g} at step {s}; the limit is "
                       f"{limit:.4g} nats ({DIVERGE_FACTOR} ln V, V = "
                       f"{ctx.V}); lower lr or set clip")
        return False
    jac_r = method.jac_r
    method.objective(loss).backward()
    method.end_step()
    gn = grad_norm_clip(ctx.params, cfg["clip"])
    log.gnorm.append(gn)
    log.lr.append(lr)
    opt.step()
    t2 = ctx.clock.now()
    log.fwd_ms.append((t1 - t0) * 1e3)
    log.bwd_ms.append((t2 - t1) * 1e3)
    log.ms.append((t2 - t0) * 1e3)
    last = method.last
    log.fwd.append(last["fwd"])
    log.bwd.append(last["bwd"])
    log.f_ev.append(m.evals - ev0)
    # the regulariser's VJP and the backward through it
    log.v_ev.append(last["vjps"] + (2 if jac_r is not None else 0))
    log.jac.append(jac_r)
    if not math.isfinite(gn):
        log.status = "diverged"
        log.message = (f"gradient norm became {gn:g} at step {s}; lower "
                       "lr or raise clip")
        return False
    return True


def compile_info(ctx):
    """The record's compile object (results/SCHEMA.md §compile) of a
    compile=true run, else None; with it one stderr line of what
    torch.compile made of the run (torch._dynamo's counters), so that a
    slow compiled run says why."""
    if not ctx.cfg.get("compile", False):
        return None
    scope = ("step" if ctx.step is not None else "block")
    info = {"mode": ctx.step.mode if ctx.step is not None else "default",
            "scope": scope, "compile_s": ctx.compile_s}
    info.update(compiled.dynamo_counts())
    why = info["break_reasons"]
    print(f"deqtorch: torch.compile of the {scope}: {info['graphs']} "
          f"graphs, {info['graph_breaks']} graph breaks, "
          f"{info['recompiles']} recompiles, {info['cudagraph_skips']} "
          "CUDA-graph skips"
          + (f" ({'; '.join(w[:80] for w in why)})" if why else ""),
          file=sys.stderr, flush=True)
    return info


def _eager_steps(ctx, batcher, log):
    """The training steps of every run but compile=true's unroll."""
    cfg = ctx.cfg
    every = max(1, cfg["steps"] // 10)
    for s in range(1, cfg["steps"] + 1):
        tok = batcher.next_batch()
        if not _step(ctx, ctx.opt, tok, s, log):
            break
        log.ok_steps = s
        if ctx.active is ctx.pre:
            log.pre_depth = ctx.tracker.peak_depth
        if s % every == 0 or s == cfg["steps"]:
            print(f"deqtorch: {cfg['method']} step {s}/{cfg['steps']} "
                  f"loss {log.loss[-1]:.4f}", file=sys.stderr, flush=True)
        if interrupt.first():  # bench/run/train_step.c interrupted()
            log.status = "interrupted"
            log.message = (f"interrupted by {interrupt.name()} after step "
                           f"{s} of {cfg['steps']}")
            break
    if cfg.get("compile", False):
        # the warmup steps' wall seconds (perf_counter after a sync)
        ctx.compile_s = sum(log.ms[:cfg["warmup_steps"]]) / 1e3


def train(ctx, batcher):
    """The training loop; returns its Log (progress on stderr)."""
    cfg, log = ctx.cfg, Log()
    ctx.opt = adam(ctx)
    print(f"deqtorch: {cfg['method']} training, {cfg['steps']} steps",
          file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    if ctx.step is not None:
        compiled.train_steps(ctx, batcher, log, lr_at)
    else:
        _eager_steps(ctx, batcher, log)
    log.train_s = time.perf_counter() - t0
    ctx.compile = compile_info(ctx)
    ctx.track = True  # evaluation: the hooks as before
    log.p0 = min(cfg.get("pretrain_steps", 0) if ctx.pre else 0,
                 log.ok_steps)
    ctx.active = ctx.method
    return log


def evaluate(ctx, ids, spectral=False):
    """Mean loss over whole batches of a split: (mean or None, tokens,
    per-batch ms, per-batch forward solver Stats, per-batch evals). With
    spectral, after the first batch ctx.spectral = ρ(J_f(z*)) there
    (deq with spectral_radius_iters; else None). A SIGINT or SIGTERM
    (interrupt.py) stops it after the current batch with ctx.eval_cut set:
    the mean is then None, the tokens and lists those of the batches
    evaluated (bench/run/evaluate.c)."""
    cfg = ctx.cfg
    B, T = cfg["batch_size"], cfg["seq_len"]
    try:
        b = data.Batcher(ids, B, T)
    except ValueError:
        return None, 0, [], [], []
    nb = min(cfg["eval_tokens"] // (B * T), b.n_batches)
    total, ms, sts, evs = 0.0, [], [], []
    with torch.no_grad():
        for k in range(nb):
            ev0 = ctx.model.evals
            t0 = ctx.clock.now()
            loss, _ = ctx.loss(b.get(k), False)
            lv = float(loss)
            ms.append((ctx.clock.now() - t0) * 1e3)
            sts.append(ctx.method.last["fwd"])
            evs.append(ctx.model.evals - ev0)
            total += lv * B * T
            if spectral and k == 0:
                sr = getattr(ctx.method, "spectral_radius", None)
                ctx.spectral = sr() if sr else None
            if interrupt.first():
                ctx.eval_cut = True
                return None, len(ms) * B * T, ms, sts, evs
    n = nb * B * T
    return (total / n if n else None), n, ms, sts, evs
