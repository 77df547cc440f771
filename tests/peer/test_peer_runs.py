#!/usr/bin/python3
"""deqtorch's own runs (bench/pytorch/deqtorch), through deqtorch.py
directly, not through deqbench (whose key table may not have every key
yet), on a tiny learnable corpus:

  test_peer_runs.py BUILD/bench/deqbench SOURCE_ROOT

precision=bf16 (autocast; its gradients against float32's for every
method, tiny runs against float32 runs), the precision / tf32 / compile
refusals and the normalisation of the tf32 alias (class Precision); the
timing of the step (class Timing); compile=true's scope with a stand-in
torch.compile (class Compile). Exits 77 (meson's skip) with a message
where torch cannot be imported. (test_peer.py has the gradients against
deqbench.)
"""
import json
import math
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_setup import setup  # noqa: E402

torch, DEQBENCH, ROOT, DEQTORCH = setup("peer-runs")
from deqtorch import common, config, data  # noqa: E402


def check(cfgs):
    return subprocess.run([sys.executable, DEQTORCH, "check"],
                          input=json.dumps(cfgs), capture_output=True,
                          text=True)


class Runs(unittest.TestCase):
    """deqtorch.py runs on a tiny learnable corpus, through deqtorch.py
    directly (not through deqbench, whose key table may not have every
    key yet): what Precision and Timing share."""
    V = 32
    TINY = dict(corpus="synthetic", d_model=32, n_heads=2, d_ff=64,
                seq_len=16, batch_size=4, layers=2, steps=20,
                warmup_steps=2, lr_warmup=2, lr=3e-3, eval_tokens=256,
                threads=1)

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        # a learnable stream: next = 5 prev + 3 (mod V), 10% uniform noise
        rng = np.random.default_rng(5)
        cls.paths = {}
        for split, n in (("train", 8000), ("valid", 1000), ("test", 1000)):
            x = [0]
            for r, j in zip(rng.random(n - 1), rng.integers(0, cls.V,
                                                            n - 1)):
                x.append((x[-1] * 5 + 3) % cls.V if r < 0.9 else int(j))
            cls.paths[split] = os.path.join(cls.tmp.name, f"{split}.ids")
            data.write_ids(cls.paths[split], x, cls.V)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def request(self, **kw):
        cfg = dict(common.DEFAULTS, impl="pytorch", **dict(self.TINY, **kw))
        return {"config": cfg, "data": dict(self.paths, corpus="synthetic",
                                            vocab_size=self.V)}

    def run_deqtorch(self, **kw):
        return subprocess.run([sys.executable, DEQTORCH, "run"],
                              input=json.dumps(self.request(**kw)),
                              capture_output=True, text=True)

    def record(self, **kw):
        r = self.run_deqtorch(**kw)
        self.assertEqual(r.returncode, 0, r.stderr)
        rec = json.loads(r.stdout)
        self.assertEqual(rec["status"], "ok", rec["message"])
        return rec

    def assert_refused(self, r, want):
        """Exit 2, no record, one stderr line containing want."""
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(r.stdout, "")
        lines = r.stderr.splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn(want, lines[0])

    def assert_loss_close(self, a, b, tol):
        for k in ("train_loss_final", "valid_loss", "test_loss"):
            x, y = a["quality"][k], b["quality"][k]
            self.assertIsNotNone(x, k)  # null: not finite
            self.assertTrue(np.isfinite(x), k)
            self.assertLess(abs(x - y) / y, tol, f"{k}: {x} vs {y}")


class Precision(Runs):
    """precision=bf16 runs against float32 runs, and the refusals of
    precision, tf32 and compile."""

    def test_bf16_transformer(self):
        """Tiny transformer, unroll of 2 layers, 20 steps: bf16 trains as
        float32 does (final, valid and test loss within 3%; measured
        0.02%), the loss fell (the comparison means something), the
        record's config says precision=bf16 (tf32 false, compile false),
        and the saved activations are counted smaller than float32's
        (bf16 tensors; autocast's weight copies are not depth)."""
        f = self.record(method="unroll")
        b = self.record(method="unroll", precision="bf16")
        self.assertLess(f["quality"]["train_loss_final"],
                        f["quality"]["train_loss_first"] - 0.3)
        self.assert_loss_close(b, f, 0.03)
        self.assertEqual(b["config"]["precision"], "bf16")
        self.assertIs(b["config"]["tf32"], False)
        self.assertIs(b["config"]["compile"], False)
        self.assertEqual(f["config"]["precision"], "fp32")
        self.assertIsNone(b["device"]["tf32"])  # cpu: no switch
        self.assertEqual(b["device"]["elem_bytes"], 4)  # float32 weights
        db = b["memory"]["peak_bytes"]["depth"]
        df = f["memory"]["peak_bytes"]["depth"]
        self.assertGreater(db, 0)
        self.assertLess(db, df)
        self.assertEqual(b["memory"]["peak_bytes"]["params"],
                         f["memory"]["peak_bytes"]["params"])

    def test_bf16_depth(self):
        """The depth accounting under bf16 counts saved activations at
        their dtype's size and not autocast's bf16 copies of the weights:
        tanh_cell's unroll saves each layer's input to the cell GEMM and
        its tanh output, float32 or bfloat16, so bf16's depth is exactly
        half of float32's (a counted weight copy would add 2 d² bytes)."""
        kw = dict(model="tanh_cell", method="unroll", layers=3, steps=2,
                  eval_tokens=0)
        f = self.record(**kw)["memory"]["peak_bytes"]["depth"]
        b = self.record(precision="bf16", **kw)["memory"]["peak_bytes"]
        self.assertGreater(f, 0)
        self.assertEqual(2 * b["depth"], f)

    def test_bf16_deq(self):
        """method=deq under bf16: the forward and IFT backward solves
        converge as float32's do (every step, at f_tol = b_tol = 1e-2:
        bf16's rounding of the block puts a floor near 1e-3 under the
        relative residual, so the default 1e-3 is not reached in most
        steps), in about as many iterations, with the solver's memory of
        float32 state (the same bytes); the losses within 3%."""
        kw = dict(method="deq", f_tol=1e-2, b_tol=1e-2)
        f = self.record(**kw)
        b = self.record(precision="bf16", **kw)
        self.assert_loss_close(b, f, 0.03)
        for d in ("forward", "backward"):
            sf, sb = f["solver"][d], b["solver"][d]
            self.assertEqual(sb["steps"], 20, d)
            self.assertEqual(sb["converged_fraction"], 1.0, d)
            self.assertEqual(sf["converged_fraction"], 1.0, d)
            self.assertEqual(sb["nonfinite_steps"], 0, d)
            self.assertLess(abs(sb["iters_mean"] - sf["iters_mean"]),
                            0.3 * sf["iters_mean"], d)
            self.assertLess(sb["residual_max"], 1e-2, d)
        self.assertEqual(b["memory"]["peak_bytes"]["solver"],
                         f["memory"]["peak_bytes"]["solver"])

    def test_refusals(self):
        """precision and its alias tf32: tf32=true with precision=bf16,
        precision=tf32 off CUDA, precision=bf16 on cpu64 and an unknown
        precision are refused by `check` and `run` (exit 2, one line)."""
        ok = dict(common.DEFAULTS, impl="pytorch")
        self.assertEqual(check([ok, dict(ok, precision="bf16")]).returncode,
                         0)
        for bad, want in (({"tf32": True, "precision": "bf16"},
                           "tf32=true is not supported by impl=pytorch"),
                          ({"precision": "tf32"}, "precision=tf32 is not"),
                          ({"precision": "bf16", "device": "cpu64"},
                           "precision=bf16 is not"),
                          ({"precision": "fp16"}, "precision=fp16 is not")):
            with self.subTest(**bad):
                self.assert_refused(check([ok, dict(ok, **bad)]), want)
                self.assert_refused(self.run_deqtorch(**bad), want)

    def test_normalise(self):
        """tf32=true is precision=tf32 (bench/config/config.c): afterwards
        tf32 == (precision == tf32); a config without precision is left
        as it is."""
        n = config.normalise
        self.assertEqual(n({"tf32": True, "precision": "fp32"}),
                         {"tf32": True, "precision": "tf32"})
        self.assertEqual(n({"tf32": False, "precision": "tf32"}),
                         {"tf32": True, "precision": "tf32"})
        for p in ("fp32", "bf16"):
            self.assertEqual(n({"tf32": False, "precision": p}),
                             {"tf32": False, "precision": p})
        self.assertEqual(n({"tf32": True}), {"tf32": True})

    def test_compile_refused(self):
        """compile=true on torch < 2: `check` and `run` exit 2 with one
        line naming the torch version."""
        if hasattr(torch, "compile"):
            self.skipTest(f"torch {torch.__version__} has torch.compile")
        want = (f"compile=true needs torch >= 2 (this is torch "
                f"{torch.__version__}); drop compile")
        ok = dict(common.DEFAULTS, impl="pytorch")
        self.assert_refused(check([dict(ok, compile=True)]), want)
        self.assert_refused(self.run_deqtorch(compile=True), want)
        # the torch version is named first, whatever warmup_steps says
        self.assert_refused(self.run_deqtorch(compile=True,
                                              warmup_steps=1), want)


class Timing(Runs):
    """What deqtorch's timed steps run: no saved-tensor hooks after the
    warmup (train.tracks), one host read for the clipping norm."""

    def test_tracks(self):
        from deqtorch import train
        c = dict(common.DEFAULTS, warmup_steps=2)
        self.assertEqual([train.tracks(c, s) for s in (1, 2, 3, 9)],
                         [True, True, False, False])
        self.assertTrue(train.tracks(dict(c, warmup_steps=0), 1))
        self.assertFalse(train.tracks(dict(c, warmup_steps=0), 2))
        self.assertTrue(train.tracks(dict(c, pretrain_steps=5), 5))
        self.assertTrue(train.tracks(dict(c, jac_loss_weight=0.5), 9))

    def test_depth_from_the_warmup(self):
        """The depth peak measured over the warmup steps alone is the one
        measured over every step (each step saves the same tensors)."""
        for m in ("unroll", "checkpoint", "deq"):
            kw = dict(method=m, layers=4, steps=6, eval_tokens=0)
            one = self.record(warmup_steps=1, **kw)["memory"]
            every = self.record(warmup_steps=6, **kw)["memory"]
            self.assertGreater(one["peak_bytes"]["depth"], 0, m)
            self.assertEqual(one["peak_bytes"], every["peak_bytes"], m)
            self.assertEqual(one["peak_depth_solver_bytes"],
                             every["peak_depth_solver_bytes"], m)

    def test_clip_norm_bits(self):
        """grad_norm_clip's norm is the per-parameter float64 sums added
        in parameter order on the host, bit for bit."""
        from deqtorch import train
        g = torch.Generator().manual_seed(3)
        ps = [torch.nn.Parameter(torch.zeros(n)) for n in (7, 300, 1)]
        for p in ps:
            p.grad = torch.randn(p.shape, generator=g)
        want = math.sqrt(sum(float(p.grad.double().pow(2).sum())
                             for p in ps))
        grads = [p.grad.clone() for p in ps]
        self.assertEqual(train.grad_norm_clip(ps, 0.0), want)
        self.assertEqual(train.grad_norm_clip(ps, want / 2), want)
        for p, g0 in zip(ps, grads):
            self.assertTrue(torch.equal(p.grad, g0 * (want / 2 / want)))


# deqtorch.py run with a stand-in torch.compile (the identity, recording
# the names of what it was given and its mode), a stand-in
# torch.compiler.cudagraph_mark_step_begin (counting its calls) and torch
# 1.13 passed off as torch 2
STAND_IN = r"""
import sys, types
sys.path.insert(0, sys.argv[1])
import torch
from deqtorch import cli, config
made, marks = [], []
def compile(fn, mode=None, **kw):
    made.append(fn.__name__ + ("@" + mode if mode else ""))
    return fn
torch.compile = compile
torch.compiler = types.SimpleNamespace(
    cudagraph_mark_step_begin=lambda: marks.append(1))
config.torch_version = lambda: "2.99.0+stand-in"
try:
    code = cli.main(["deqtorch.py", "run"])
finally:
    print("compiled:", ",".join(made), file=sys.stderr)
    print("marks:", len(marks), file=sys.stderr)
sys.exit(code)
"""


class Compile(Runs):
    """compile=true's code paths, with the stand-in torch.compile above
    (Debian's torch 1.13 has none). unroll: the whole step's loss
    (compiled.Step.loss, mode max-autotune) run by compiled.train_steps,
    whose losses equal the eager run's within float rounding (the
    clipping is torch's clip_grad_norm_ in float32, the eager one's in
    float64); the other methods hand over their block, which changes no
    bit of the run (the stand-in compiles nothing, so a difference would
    be deqtorch's own: an operation left out, reordered or counted
    twice)."""

    def run_stand_in(self, **kw):
        r = subprocess.run([sys.executable, "-c", STAND_IN,
                            os.path.dirname(DEQTORCH)],
                           input=json.dumps(self.request(**kw)),
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = {}
        for ln in r.stderr.splitlines():
            for k in ("compiled:", "marks:"):
                if ln.startswith(k):
                    got[k] = ln[len(k):].strip()
        self.stderr = r.stderr
        return json.loads(r.stdout), got["compiled:"], int(got["marks:"])

    def test_block_scope_and_bits(self):
        for m in ("checkpoint", "deq"):
            rec, made, marks = self.run_stand_in(method=m, compile=True)
            self.assertEqual(made, "_block", m)
            self.assertEqual(marks, 0, m)
            self.assertIs(rec["config"]["compile"], True, m)
            self.assertEqual(rec["status"], "ok", rec["message"])
            ref = self.record(method=m)
            for k in ("train_loss_first", "train_loss_final",
                      "valid_loss", "test_loss"):
                self.assertEqual(rec["quality"][k], ref["quality"][k],
                                 f"{m}: {k}")
            self.assertEqual(rec["evals"], ref["evals"], m)
            self.assertEqual(rec["solver"], ref["solver"], m)
            c = rec["compile"]
            self.assertEqual((c["mode"], c["scope"]), ("default", "block"))
            self.assertGreater(c["compile_s"], 0)
            self.assertIsNone(ref["compile"])

    def test_whole_step(self):
        for prec in ("fp32", "bf16"):
            kw = dict(compile=True, warmup_steps=3, trace=True,
                      precision=prec)
            rec, made, marks = self.run_stand_in(**kw)
            self.assertEqual(made, "loss@max-autotune", prec)
            self.assertEqual(marks, self.TINY["steps"], prec)
            self.assertEqual(rec["status"], "ok", rec["message"])
            ref = self.record(**dict(kw, compile=False))
            tr, rt = rec["trace"], ref["trace"]
            # bf16's rounding amplifies the clipping's last-bit changes
            tol = 1e-4 if prec == "fp32" else 3e-3
            for k in ("loss", "grad_norm"):
                self.assertEqual(len(tr[k]), self.TINY["steps"], k)
                np.testing.assert_allclose(tr[k], rt[k], rtol=tol,
                                           err_msg=f"{prec} {k}")
            self.assertEqual(tr["lr"], rt["lr"])
            self.assertEqual(len(tr["step_ms"]), self.TINY["steps"])
            self.assertTrue(all(t > 0 for t in tr["step_ms"]))
            self.assertEqual(rec["evals"], ref["evals"], prec)
            self.assertEqual(rec["timing"]["steps_timed"],
                             self.TINY["steps"] - 3)
            q, rq = rec["quality"], ref["quality"]
            for k in ("valid_loss", "test_loss"):
                self.assertAlmostEqual(q[k], rq[k], delta=tol * rq[k])
            c = rec["compile"]
            self.assertEqual((c["mode"], c["scope"]),
                             ("max-autotune", "step"))
            self.assertGreater(c["compile_s"], 0)
            self.assertEqual(set(c), {"mode", "scope", "compile_s",
                                      "graphs", "graph_breaks",
                                      "recompiles", "cudagraph_skips",
                                      "break_reasons"})
            # depth from the untimed eager probe: the eager run's
            self.assertEqual(rec["memory"]["peak_bytes"]["depth"],
                             ref["memory"]["peak_bytes"]["depth"])

    def test_whole_step_divergence(self):
        """A loss over the limit is found at the next read-back: the
        message names the step and the steps run before the read."""
        rec, _, _ = self.run_stand_in(compile=True, warmup_steps=3,
                                      lr=50.0, clip=0.0, steps=20)
        self.assertEqual(rec["status"], "diverged", rec["message"])
        self.assertRegex(rec["message"],
                         r"at step (\d+); .*steps \d+\.\.\d+ ran before")
        self.assertLess(rec["timing"]["steps_timed"], 20)

    def test_mode_override(self):
        """DEQTORCH_COMPILE_MODE replaces max-autotune; a bad one exits 2
        with one line."""
        env = dict(os.environ, DEQTORCH_COMPILE_MODE="reduce-overhead")
        r = subprocess.run([sys.executable, "-c", STAND_IN,
                            os.path.dirname(DEQTORCH)],
                           input=json.dumps(self.request(
                               compile=True, warmup_steps=3, steps=6)),
                           capture_output=True, text=True, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["compile"]["mode"],
                         "reduce-overhead")
        self.assertIn("compiled: loss@reduce-overhead", r.stderr)
        env["DEQTORCH_COMPILE_MODE"] = "fast"
        r = subprocess.run([sys.executable, "-c", STAND_IN,
                            os.path.dirname(DEQTORCH)],
                           input=json.dumps(self.request(
                               compile=True, warmup_steps=3, steps=6)),
                           capture_output=True, text=True, env=env)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(r.stdout, "")
        self.assertIn("deqtorch: DEQTORCH_COMPILE_MODE=fast is not a "
                      "torch.compile mode; use one of", r.stderr)

    def test_warmup_too_small(self):
        for w, steps in ((2, 20), (-1, 10)):
            r = subprocess.run([sys.executable, "-c", STAND_IN,
                                os.path.dirname(DEQTORCH)],
                               input=json.dumps(self.request(
                                   compile=True, warmup_steps=w,
                                   steps=steps)),
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertEqual(r.stdout, "")
            self.assertIn("warmup_steps=2 is not supported by impl=pytorch"
                          "; compile=true with method=unroll", r.stderr)
            self.assertIn("set warmup_steps=3 or more", r.stderr)
        # the other methods keep the block compile: no such floor
        rec, _, _ = self.run_stand_in(method="checkpoint", compile=True,
                                      warmup_steps=1)
        self.assertEqual(rec["status"], "ok", rec["message"])


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
