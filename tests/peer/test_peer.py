#!/usr/bin/python3
"""Cross-framework tests: deqbench against PyTorch (bench/pytorch/deqtorch).

  test_peer.py BUILD/bench/deqbench SOURCE_ROOT

For each model, from one `deqbench params init` file and one tokens file:
the loss and every parameter gradient of `deqbench grad device=cpu64`
equal PyTorch float64's (unroll, checkpoint, selective: 1e-4 relative),
and deq with b_mode=ift at a well-posed equilibrium equals a
dense-Jacobian implicit gradient (tests/peer/test_selective.py has
deqtorch's selective against its unroll); plus deqtorch's `check`
refusals and a tiny `run`. deqtorch's own runs (precision, timing,
compile=true): tests/peer/test_peer_runs.py.
Exits 77 (meson's skip) with a message where torch cannot be imported.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_setup import setup  # noqa: E402

torch, DEQBENCH, ROOT, DEQTORCH = setup("peer")
from deqtorch import common, data, grad, safetensors  # noqa: E402
SHAPE = dict(d_model=8, n_heads=2, d_ff=12, seq_len=5, vocab_size=11)
# the registered models: the `model` key's values (deqbench's registry)
MODELS = tuple(next(k for k in json.loads(subprocess.run(
    [DEQBENCH, "run", "--help-json"], check=True, capture_output=True,
    text=True).stdout) if k["name"] == "model")["choices"].split(", "))
# Block tensors scaled for the deq tests so that the Jacobian's spectral
# radius is clearly below 1 (checked < 0.9): the post-LN transformer's ln2
# affine parameters by 0.3 (LayerNorm's output has unit std whatever the
# weights before it: 0.5 left rho at 0.92), the others' weights by 0.5.
SCALE = {"transformer": ("block.ln2.", 0.3),
         "tanh_cell": ("cell.weight", 0.5),
         "trellisnet": ("block.conv.", 0.5)}


def kv(d):
    return [f"{k}={v}" for k, v in d.items()]


def rel_err(a, b):
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


class Peer(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = cls.tmp.name
        rng = np.random.default_rng(7)
        cls.tok = rng.integers(0, 11, (3, 6)).astype(np.int32)
        cls.tokp = cls.path("tok.safetensors")
        safetensors.write(cls.tokp, {"tokens": cls.tok})
        for m in MODELS:
            p = cls.path(f"p_{m}.safetensors")
            subprocess.run([DEQBENCH, "params", "init", f"model={m}",
                            "corpus=synthetic", "init=pytorch", f"out={p}"]
                           + kv(SHAPE), check=True, capture_output=True)
            t, meta = safetensors.read(p)
            pre, a = SCALE[m]
            t = {k: (v * a if k.startswith(pre) else v)
                 for k, v in t.items()}
            safetensors.write(cls.path(f"s_{m}.safetensors"), t, meta)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @classmethod
    def path(cls, name):
        return os.path.join(cls.dir, name)

    def deqbench_grad(self, m, params, extra):
        out = self.path("g.safetensors")
        subprocess.run([DEQBENCH, "grad", f"model={m}", "corpus=synthetic",
                        "device=cpu64", f"params={params}",
                        f"tokens={self.tokp}", f"out={out}"]
                       + kv(SHAPE) + kv(extra), check=True,
                       capture_output=True)
        t = safetensors.read(out)[0]
        return float(t["loss"][0]), {k[5:]: v.astype(np.float64)
                                     for k, v in t.items() if k != "loss"}

    def torch_grad(self, m, params, extra):
        cfg = dict(common.DEFAULTS, model=m, device="cpu64", **SHAPE, **extra)
        loss, g, _ = grad.loss_and_grads(cfg, params, self.tok)
        return loss, g

    def record(self, args, out):
        """Runs `deqbench ARGS out=OUT` (exit 0), checks the record with
        `deqbench validate --strict` and returns it."""
        r = subprocess.run([DEQBENCH] + args + [f"out={out}"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        v = subprocess.run([DEQBENCH, "validate", "--strict", out],
                           capture_output=True, text=True)
        self.assertEqual(v.returncode, 0, v.stdout + v.stderr)
        with open(out) as f:
            return json.loads(f.readline())

    def assert_close(self, a, b, tol, what):
        la, ga = a
        lb, gb = b
        self.assertLess(abs(la - lb) / abs(lb), tol, f"{what}: loss")
        self.assertEqual(sorted(ga), sorted(gb), f"{what}: tensor names")
        for k in gb:
            self.assertLess(rel_err(ga[k], gb[k]), tol, f"{what}: {k}")

    def test_unroll_checkpoint(self):
        """deqbench float64 vs PyTorch float64, 1e-4 relative per tensor
        (deqbench's file holds float32: 6e-8 of rounding); selective on
        the transformer (the one model with selective tapes) too."""
        for m in MODELS:
            p = self.path(f"p_{m}.safetensors")
            sel = ({"method": "selective", "layers": 4},) \
                if m == "transformer" else ()
            for extra in ({"method": "unroll", "layers": 4},
                          {"method": "checkpoint", "layers": 5, "k": 2},
                          *sel):
                with self.subTest(model=m, **extra):
                    self.assert_close(self.torch_grad(m, p, extra),
                                      self.deqbench_grad(m, p, extra),
                                      1e-4, f"{m} {extra}")

    def test_perturbed_parameter_fails(self):
        """The comparison can fail: a parameter moved by 1e-3 shows."""
        m = "tanh_cell"
        p = self.path(f"p_{m}.safetensors")
        t, meta = safetensors.read(p)
        t = dict(t, **{"cell.weight": t["cell.weight"] + 1e-3})
        q = self.path("perturbed.safetensors")
        safetensors.write(q, t, meta)
        extra = {"method": "unroll", "layers": 4}
        with self.assertRaises(AssertionError):
            self.assert_close(self.torch_grad(m, q, extra),
                              self.deqbench_grad(m, p, extra), 1e-4, m)

    def test_pretrain(self):
        """deq with pretrain_steps=4 (pretrain_layers=3) through `deqbench
        run` in both implementations from deqbench's initial parameters:
        records pass --strict, the pretrain objects count the same steps
        and applications, the deq phase's evals and timing leave them out,
        and the unrolled steps' losses agree to 1e-5 (float32: 6e-8
        measured)."""
        recs = {}
        for impl in ("deqbench", "pytorch"):
            recs[impl] = self.record(
                ["run", "corpus=synthetic", f"impl={impl}", "method=deq",
                 "pretrain_steps=4", "pretrain_layers=3", "d_model=8",
                 "n_heads=2", "d_ff=12", "seq_len=6", "batch_size=4",
                 "steps=8", "warmup_steps=1", "eval_tokens=48", "threads=1",
                 "trace=true"], self.path(f"pretrain-{impl}.jsonl"))
        a, b = recs["pytorch"], recs["deqbench"]
        for k in ("steps", "layers", "steps_done", "steps_timed",
                  "forward_evals_per_step", "vjp_evals_per_step"):
            self.assertEqual(a["pretrain"][k], b["pretrain"][k], k)
        self.assertEqual(a["evals"]["steps"], 4)
        self.assertEqual(a["timing"]["steps_timed"], 3)
        self.assertEqual(a["trace"]["fwd_iters"][:4], [0] * 4)
        self.assertEqual(a["trace"]["fwd_residual"][:4], [None] * 4)
        for x, y in zip(a["trace"]["loss"][:4], b["trace"]["loss"][:4]):
            self.assertLess(abs(x - y) / y, 1e-5)

    def test_revolve(self):
        """method=revolve (L = 7; slots 1, 2 and 0 = round(log2 7) = 3):
        deqbench float64 and deqtorch float64 agree to 1e-4 (deqbench's
        float32 file), deqtorch's gradients are its unroll's to 1e-12 (the
        same block calls on the same values), and a step applies the block
        L + A(L, s) times, A from Griewank's closed form (revolve.c)."""
        from deqtorch import methods
        from math import comb

        def closed_a(L, s):
            r = 1
            while comb(s + 1 + r, r) < L:
                r += 1
            return r * L - comb(s + 1 + r, r - 1)
        L = 7
        for m in MODELS:
            p = self.path(f"p_{m}.safetensors")
            un = self.torch_grad(m, p, {"method": "unroll", "layers": L})
            for slots in (1, 2, 0):
                extra = {"method": "revolve", "layers": L, "slots": slots}
                with self.subTest(model=m, slots=slots):
                    cfg = dict(common.DEFAULTS, model=m, device="cpu64",
                               **SHAPE, **extra)
                    loss, g, ctx = grad.loss_and_grads(cfg, p, self.tok)
                    self.assert_close((loss, g), un, 1e-12,
                                      f"revolve vs unroll {m}")
                    self.assert_close((loss, g),
                                      self.deqbench_grad(m, p, extra),
                                      1e-4, f"revolve {m}")
                    s = methods.revolve_slots(cfg)
                    self.assertEqual(methods.revolve_cost(L, s)[0],
                                     closed_a(L, s))
                    self.assertEqual(ctx.model.evals, L + closed_a(L, s))

    def test_offload(self):
        """method=offload: deqtorch's gradients are its unroll's to 1e-12
        (the saved tensors go to host copies and back, exactly) and
        deqbench's to 1e-4; the copies moved bytes, counted as host
        memory, none as depth."""
        for m in MODELS:
            p = self.path(f"p_{m}.safetensors")
            extra = {"method": "offload", "layers": 4}
            with self.subTest(model=m):
                cfg = dict(common.DEFAULTS, model=m, device="cpu64", **SHAPE,
                           **extra)
                loss, g, ctx = grad.loss_and_grads(cfg, p, self.tok)
                ctx.method.end_step()
                self.assert_close(
                    (loss, g),
                    self.torch_grad(m, p, dict(extra, method="unroll")),
                    1e-12, f"offload vs unroll {m}")
                self.assert_close((loss, g), self.deqbench_grad(m, p, extra),
                                  1e-4, f"offload {m}")
                self.assertGreater(ctx.method.copies[-1][0], 0)
                self.assertGreater(ctx.tracker.peak_host, 0)
                self.assertEqual(ctx.tracker.peak_depth, 0)

    def test_head_chunk(self):
        """head_chunk=K (K = 4 of B·T = 15 positions: a ragged last chunk)
        on unroll: deqbench float64 and deqtorch float64 agree to 1e-4
        (deqbench's float32 file), and deqtorch's chunked head gives its
        unchunked gradients to 1e-12 (summation order only)."""
        for m in MODELS:
            p = self.path(f"p_{m}.safetensors")
            extra = {"method": "unroll", "layers": 3}
            with self.subTest(model=m):
                ch = self.torch_grad(m, p, dict(extra, head_chunk=4))
                self.assert_close(
                    ch, self.deqbench_grad(m, p, dict(extra, head_chunk=4)),
                    1e-4, f"head_chunk {m}")
                self.assert_close(ch, self.torch_grad(m, p, extra), 1e-12,
                                  f"chunked vs whole {m}")

    def test_deq_ift_dense(self):
        """deq b_mode=ift of deqbench and of deqtorch against the implicit
        gradient from the dense Jacobian: y = (I − J)⁻ᵀ ∂L/∂z at z*. With
        rel tolerances 1e-12 and ρ(J) < 0.9, the solves' error in z* and y
        is at most 1e-12/(1 − ρ) ≈ 1e-11 relative; deqbench's float32 file
        adds 6e-8; 1e-6 leaves room for both and fails on any
        method-level difference (jfb differs by > 1e-2 here)."""
        extra = {"method": "deq", "b_mode": "ift", "f_tol": 1e-12,
                 "b_tol": 1e-12, "f_max_iter": 300, "b_max_iter": 300}
        for m in MODELS:
            p = self.path(f"s_{m}.safetensors")
            with self.subTest(model=m):
                ref, rho = dense_ift(m, p, self.tok)
                self.assertLess(rho, 0.9, f"{m}: spectral radius")
                self.assert_close(self.deqbench_grad(m, p, extra), ref,
                                  1e-6, f"deqbench {m}")
                self.assert_close(self.torch_grad(m, p, extra), ref,
                                  1e-6, f"deqtorch {m}")
                jfb = self.torch_grad(m, p, dict(extra, b_mode="jfb"))
                with self.assertRaises(AssertionError):
                    self.assert_close(jfb, ref, 1e-6, "jfb")

    def test_jac_loss(self):
        """deq with the Jacobian regulariser (jac_loss_freq=1): deqbench
        float64 (γ∇R from a central difference of VJPs, η = ∛ε ≈ 6e-6:
        bias ~0.34 η² ≈ 1e-11 relative) against deqtorch float64 (autograd's
        double backward), both drawing the same probe ε from the seed.
        With solves to 1e-12 the two agree to 4e-8 (measured: the float32
        rounding of deqbench's file); 1e-6 fails on a wrong probe, layout,
        normalisation or weight: γ∇R changes the block's gradients by up to
        4-8x here (the head's not at all; checked to move some tensor by
        more than 1e-2)."""
        base = {"method": "deq", "b_mode": "ift", "f_tol": 1e-12,
                "b_tol": 1e-12, "f_max_iter": 300, "b_max_iter": 300}
        reg = dict(base, jac_loss_weight=5.0, jac_loss_freq=1.0)
        for m in MODELS:
            p = self.path(f"s_{m}.safetensors")
            with self.subTest(model=m):
                ours = self.torch_grad(m, p, reg)
                self.assert_close(ours, self.deqbench_grad(m, p, reg),
                                  1e-6, f"jac_loss {m}")
                with self.assertRaises(AssertionError):
                    self.assert_close(ours, self.torch_grad(m, p, base),
                                      1e-2, "without the regulariser")

    def test_eval(self):
        """`deqbench eval` of one parameter file in both implementations:
        records of kind eval that pass --strict, with the same valid and
        test losses to 1e-5 (float32 both; measured 1e-7): unroll on the
        transformer, and deq on tanh_cell with its cell weights halved so
        that both solves converge (f_tol 1e-6, in 8 iterations), where
        also the spectral radius of J_f(z*) (30 power iterations from the
        same Gaussian draw) agrees to 1e-5."""
        base = ["corpus=synthetic", "d_model=8", "n_heads=2", "d_ff=12",
                "seq_len=6", "batch_size=4", "eval_tokens=96", "threads=1"]
        for m, extra in (("transformer", ["method=unroll"]),
                         ("tanh_cell", ["method=deq", "f_tol=1e-6",
                                        "f_max_iter=100",
                                        "spectral_radius_iters=30"])):
            args = base + [f"model={m}"]
            par = self.path(f"eval-{m}.safetensors")
            subprocess.run([DEQBENCH, "params", "init", f"out={par}"] + args,
                           check=True, capture_output=True)
            t, meta = safetensors.read(par)
            t = {k: (v * 0.5 if k == "cell.weight" else v)
                 for k, v in t.items()}
            safetensors.write(par, t, meta)
            loss = {}
            for impl in ("deqbench", "pytorch"):
                rec = self.record(
                    ["eval", f"impl={impl}", f"params={par}"] + args + extra,
                    self.path(f"eval-{m}-{impl}.jsonl"))
                self.assertEqual(rec["kind"], "eval")
                self.assertIsNone(rec["timing"])
                self.assertEqual(rec["quality"]["valid_eval_tokens"], 96)
                fs = rec["inference"]["forward_solve"]
                if fs is not None:
                    self.assertEqual(fs["converged_fraction"], 1.0)
                loss[impl] = (rec["quality"]["valid_loss"],
                              rec["quality"]["test_loss"])
                if m == "tanh_cell":  # ρ by the same power iterations
                    loss[impl] += (rec["quality"]["valid_spectral_radius"],)
            for a, b in zip(loss["pytorch"], loss["deqbench"]):
                self.assertLess(abs(a - b) / b, 1e-5, f"{m}: {loss}")

    def test_bf16_grads(self):
        """precision=bf16 (autocast) against float32, one step from the
        same parameters, every method: the loss moves (autocast ran) by
        under 1e-3, and every parameter's gradient exists and is float32's
        to 6e-2 of its largest element (measured: at most 2.2e-2). A
        block application without a tape (deq's solve, revolve's
        advances) that left its weight casts in autocast's cache cut the
        weights' gradients (None: an error here)."""
        for m in MODELS:
            p = self.path(f"s_{m}.safetensors")
            for extra in ({"method": "unroll", "layers": 4},
                          {"method": "checkpoint", "layers": 5, "k": 2},
                          {"method": "revolve", "layers": 5},
                          {"method": "offload", "layers": 4},
                          {"method": "deq", "f_tol": 1e-2, "b_tol": 1e-2},
                          {"method": "deq", "b_mode": "phantom"},
                          {"method": "deq", "f_tol": 1e-2, "b_tol": 1e-2,
                           "jac_loss_weight": 1.0},
                          {"method": "unroll", "layers": 3,
                           "head_chunk": 4}):
                with self.subTest(model=m, **extra):
                    cfg = dict(common.DEFAULTS, model=m, **SHAPE, **extra)
                    lf, gf, _ = grad.loss_and_grads(cfg, p, self.tok)
                    lb, gb, _ = grad.loss_and_grads(
                        dict(cfg, precision="bf16"), p, self.tok)
                    self.assertNotEqual(lb, lf, "autocast did not run")
                    self.assertLess(abs(lb - lf) / lf, 1e-3)
                    self.assertEqual(sorted(gb), sorted(gf))
                    for k in gf:
                        self.assertLess(rel_err(gb[k], gf[k]), 6e-2, k)

    def test_check_refusals(self):
        ok = dict(common.DEFAULTS, impl="pytorch")
        self.assertEqual(check([ok]).returncode, 0)
        for key, val in (("method", "bptt"), ("tf32", True),
                         ("no_such_key", 1)):
            with self.subTest(key=key):
                r = check([ok, dict(ok, **{key: val})])
                self.assertEqual(r.returncode, 2)
                lines = r.stderr.splitlines()
                self.assertEqual(len(lines), 1, r.stderr)
                self.assertIn(f"{key}=", lines[0])
                self.assertIn("impl=pytorch", lines[0])

    def test_run_record(self):
        rng = np.random.default_rng(3)
        paths = {}
        for split, n in (("train", 2000), ("valid", 400), ("test", 400)):
            paths[split] = self.path(f"{split}.ids")
            data.write_ids(paths[split], rng.integers(0, 16, n), 16)
        cfg = dict(common.DEFAULTS, impl="pytorch", corpus="synthetic",
                   d_model=8, n_heads=2, d_ff=12, seq_len=6, batch_size=4,
                   steps=6, warmup_steps=2, eval_tokens=48, threads=1,
                   method="deq", init="pytorch")
        req = {"config": cfg, "data": dict(paths, corpus="synthetic",
                                           vocab_size=16)}
        r = subprocess.run([sys.executable, DEQTORCH, "run"],
                           input=json.dumps(req), capture_output=True,
                           text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(len(lines), 1)
        rec = json.loads(lines[0])
        for k in ("status", "message", "started_at", "finished_at",
                  "config", "method", "model", "data", "timing", "memory",
                  "solver", "evals", "quality", "inference", "device",
                  "trace", "pretrain", "impl", "work"):
            self.assertIn(k, rec)
        self.assertIsNone(rec["work"])  # README: autograd's work, not ours
        self.assertEqual(rec["status"], "ok", rec["message"])
        self.assertTrue(rec["impl"].startswith("pytorch-"))
        self.assertEqual(rec["timing"]["steps_timed"], 4)
        tm, ev = rec["timing"], rec["evals"]
        N, d, V = 4 * 6, 8, 16  # transformer: F, head V d, injection 3d d
        F = 2.0 * N * (4 * d * d + 2 * d * 12) + 4.0 * N * 6 * d
        want = (ev["forward_evals_per_step"] * F +
                ev["vjp_evals_per_step"] * 2 * F +
                6.0 * N * d * V + 6.0 * N * d * 3 * d) / 1e9
        self.assertAlmostEqual(tm["step_gflop"] / want, 1.0, places=12)
        self.assertAlmostEqual(tm["gflops"] * tm["step_ms"]["median"] / 1e3
                               / tm["step_gflop"], 1.0, places=12)
        self.assertEqual(rec["quality"]["valid_eval_tokens"], 48)
        self.assertGreater(rec["memory"]["peak_bytes"]["depth"], 0)
        self.assertGreater(rec["memory"]["peak_bytes"]["solver"], 0)
        self.assertEqual(rec["solver"]["forward"]["steps"], 6)

    def test_trace_record(self):
        """A deq run with trace=true through `deqbench run impl=pytorch`:
        the record passes deqbench's schema check (--strict), carries
        deqbench's method.label, and its trace columns agree with its
        solver aggregates."""
        rec = self.record(
            ["run", "corpus=synthetic", "impl=pytorch", "method=deq",
             "d_model=8", "n_heads=2", "d_ff=12", "seq_len=6",
             "batch_size=4", "steps=6", "warmup_steps=2", "eval_tokens=48",
             "threads=1", "lr_warmup=4", "trace=true"],
            self.path("trace.jsonl"))
        self.assertTrue(rec["impl"].startswith("pytorch-"))
        self.assertEqual(rec["method"]["label"], "deq broyden/ift")
        tr = rec["trace"]
        for col in ("loss", "step_ms", "grad_norm", "lr", "fwd_iters",
                    "bwd_residual", "fwd_converged", "host_reads"):
            self.assertEqual(len(tr[col]), 6, col)
        def digits10(a, b):  # records carry 10 significant digits
            self.assertLessEqual(abs(a - b), 1e-9 * abs(b), f"{a} vs {b}")
        digits10(sum(tr["fwd_iters"]) / 6,
                 rec["solver"]["forward"]["iters_mean"])
        digits10(sum(tr["bwd_converged"]) / 6,
                 rec["solver"]["backward"]["converged_fraction"])
        self.assertEqual(len(tr["last_fwd_residual_trace"]),
                         tr["fwd_iters"][-1])
        for s, lr in enumerate(tr["lr"][:4], 1):  # linear warmup
            digits10(lr, 1e-3 * s / 4)


def check(cfgs):
    return subprocess.run([sys.executable, DEQTORCH, "check"],
                          input=json.dumps(cfgs), capture_output=True,
                          text=True)


def dense_ift(kind, params, tok):
    """(loss, grads) by the implicit function theorem with the dense
    Jacobian, and ρ(J) at z*; float64."""
    from deqtorch import train
    cfg = dict(common.DEFAULTS, model=kind, device="cpu64", **SHAPE,
               batch_size=tok.shape[0])
    ctx = train.Ctx(cfg, SHAPE["vocab_size"], params)
    m = ctx.model
    t = torch.as_tensor(tok.astype(np.int64))
    inp, tgt = t[:, :-1], t[:, 1:]
    u = m.inject_u(inp)
    with torch.no_grad():
        z = m.z0(u)
        for _ in range(2000):
            z = m.f(z, u)
    n = z.numel()
    J = torch.autograd.functional.jacobian(
        lambda x: m.f(x.view(z.shape), u.detach()).reshape(-1),
        z.reshape(-1))
    rho = float(torch.linalg.eigvals(J).abs().max())
    zl = z.clone().requires_grad_()
    loss, _ = m.head_loss(zl, tgt)
    (gz,) = torch.autograd.grad(loss, zl, retain_graph=True)
    y = torch.linalg.solve((torch.eye(n, dtype=J.dtype) - J).T,
                           gz.reshape(-1))
    surrogate = (y.view(z.shape) * m.f(z, u)).sum() + loss
    names = [k for k, _ in m.named_parameters()]
    gs = torch.autograd.grad(surrogate, [p for _, p in
                                         m.named_parameters()],
                             allow_unused=True)
    out = {k: (g.numpy() if g is not None else np.zeros(p.shape))
           for k, g, p in zip(names, gs, m.parameters())}
    return (float(loss), out), rho


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
