#!/usr/bin/python3
"""deqtorch's method=selective (bench/pytorch/deqtorch/methods.py
Selective; Megatron-LM's selective activation recomputation).

  test_selective.py BUILD/bench/deqbench SOURCE_ROOT

  - torch < 2.4 (Debian's 1.13 here): the attention core under
    torch.utils.checkpoint gives unroll's loss and gradients bit for bit
    (float64 and float32, and bf16 autocast), L block applications, and
    a depth peak below unroll's by at least the probabilities (B·H·T²
    elements a layer);
  - torch >= 2.4: the dispatch to torch's selective checkpointing
    (checkpoint(..., context_fn=partial(create_selective_checkpoint_
    contexts, sac_policy))), run with stand-ins for the 2.4 API (the
    stand-in checkpoint replays the whole block as plain checkpointing
    does): unroll's gradients bit for bit, L applications counted;
  - sac_policy on the aten ops a block forward dispatches (recorded with
    a TorchDispatchMode, fp32 and bf16 autocast): every op with a T×T
    output (scores, mask, probabilities) is recomputed, the Linear GEMMs
    and LayerNorms saved;
  - a `deqtorch.py run` record of selective has the fields of unroll's,
    the same losses, and `deqbench run impl=pytorch method=selective`
    makes a record `deqbench validate --strict` accepts; tanh_cell and
    compile=true are refused (exit 2, one line).
Exits 77 (meson's skip) where torch cannot be imported.
"""
import functools
import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_setup import setup  # noqa: E402

torch, DEQBENCH, ROOT, DEQTORCH = setup("peer-selective")
from deqtorch import common, grad, methods, models  # noqa: E402
SHAPE = dict(d_model=8, n_heads=2, d_ff=12, seq_len=5, vocab_size=11)
B, L = 3, 4


def kv(d):
    return [f"{k}={v}" for k, v in d.items()]


class Selective(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.params = os.path.join(cls.tmp.name, "p.safetensors")
        subprocess.run([DEQBENCH, "params", "init", "model=transformer",
                        "corpus=synthetic", "init=pytorch",
                        f"out={cls.params}"] + kv(SHAPE), check=True,
                       capture_output=True)
        rng = np.random.default_rng(7)
        cls.tok = rng.integers(0, 11, (B, 6)).astype(np.int32)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def grads(self, method, **kw):
        cfg = dict(common.DEFAULTS, model="transformer", method=method,
                   layers=L, **SHAPE, **kw)
        return grad.loss_and_grads(cfg, self.params, self.tok)

    def assert_bitwise(self, a, b, what):
        self.assertEqual(a[0], b[0], f"{what}: loss")
        self.assertEqual(sorted(a[1]), sorted(b[1]), what)
        for k in a[1]:
            self.assertTrue(np.array_equal(a[1][k], b[1][k]),
                            f"{what}: {k}")

    def test_equals_unroll(self):
        """torch < 2.4's path: bitwise unroll (the recomputation repeats
        the forward's ops on the same inputs), L applications, L VJPs;
        depth below unroll's by at least L·B·H·T² elements (the
        probabilities)."""
        self.assertFalse(methods.sac_available(torch.__version__))
        for kw in ({"device": "cpu64"}, {}, {"precision": "bf16"}):
            with self.subTest(**kw):
                lu, gu, cu = self.grads("unroll", **kw)
                ls, gs, cs = self.grads("selective", **kw)
                self.assert_bitwise((ls, gs), (lu, gu), f"selective {kw}")
                self.assertEqual(cs.model.evals, L)
                self.assertEqual(cs.method.last["vjps"], L)
                T, H = SHAPE["seq_len"], SHAPE["n_heads"]
                e = 4 if kw.get("precision") == "bf16" else \
                    cs.model.head.weight.element_size()  # float32 softmax
                self.assertLessEqual(cs.tracker.peak_depth,
                                     cu.tracker.peak_depth - L * B * H *
                                     T * T * e)
                self.assertGreater(cs.tracker.peak_depth, 0)
                self.assertIsNone(cs.model.block.core)

    def test_sac_dispatch(self):
        """torch >= 2.4's path with stand-ins for its API: each layer is
        one checkpoint of the block with context_fn =
        partial(create_selective_checkpoint_contexts, sac_policy); the
        stand-in checkpoint (torch 1.13's, context_fn dropped) replays the
        block, so the gradients are unroll's bit for bit and the model
        counts L applications, not the replays."""
        calls = []
        real = methods.checkpoint

        def stand_in(fn, *args, use_reentrant=None, context_fn=None):
            self.assertIs(use_reentrant, False)
            self.assertIsInstance(context_fn, functools.partial)
            self.assertIs(context_fn.func, sac_ctx)
            self.assertEqual(context_fn.args, (methods.sac_policy,))
            calls.append(fn)
            return real(fn, *args, use_reentrant=False)

        def sac_ctx(policy):
            raise AssertionError("the stand-in checkpoint calls no context")

        saved = (methods.checkpoint, methods.sac_available,
                 methods.create_selective_checkpoint_contexts)
        methods.checkpoint, methods.sac_available = stand_in, lambda v: True
        methods.create_selective_checkpoint_contexts = sac_ctx
        try:
            lu, gu, _ = self.grads("unroll", device="cpu64")
            ls, gs, cs = self.grads("selective", device="cpu64")
        finally:
            (methods.checkpoint, methods.sac_available,
             methods.create_selective_checkpoint_contexts) = saved
        self.assertTrue(cs.method.sac)
        self.assertEqual(len(calls), L)
        self.assertTrue(all(f == cs.model._block for f in calls))
        self.assert_bitwise((ls, gs), (lu, gu), "selective (SAC stand-in)")
        self.assertEqual(cs.model.evals, L)
        self.assertEqual(len(cs.method.held), L)  # each block's input
        self.assertTrue(methods.sac_available("2.4.0"))
        self.assertTrue(methods.sac_available("2.11.0+cu128"))
        self.assertFalse(methods.sac_available("2.3.1"))
        self.assertFalse(methods.sac_available("1.13.0a0+git6c9b55e"))

    def test_sac_policy(self):
        """sac_policy on the ops of one block forward (fp32, bf16
        autocast), with a stand-in CheckpointPolicy: recomputed, every op
        with a T×T output and the bmm and softmax; saved, the Linear
        GEMMs (addmm), the LayerNorms and relu."""
        from torch.utils._python_dispatch import TorchDispatchMode
        T = SHAPE["seq_len"]

        class Record(TorchDispatchMode):
            def __init__(self):
                super().__init__()
                self.ops = []

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                o = out[0] if isinstance(out, (tuple, list)) else out
                self.ops.append((func, tuple(o.shape) if isinstance(
                    o, torch.Tensor) else ()))
                return out

        class Policy:
            MUST_SAVE, PREFER_RECOMPUTE = "save", "recompute"

        m = models.LM("transformer", 11, SHAPE["d_model"], SHAPE["n_heads"],
                      SHAPE["d_ff"], T)
        z = torch.randn(B, T, SHAPE["d_model"], requires_grad=True)
        u = torch.randn(B, T, 3 * SHAPE["d_model"])
        saved = methods.CheckpointPolicy
        methods.CheckpointPolicy = Policy
        try:
            for bf16 in (False, True):
                rec = Record()
                with torch.autocast("cpu", dtype=torch.bfloat16,
                                    enabled=bf16), rec:
                    m._block(z, u)
                got = {}
                for f, shape in rec.ops:
                    p = methods.sac_policy(None, f)
                    name = f.overloadpacket.__name__
                    got.setdefault(name, set()).add(p)
                    if shape[-2:] == (T, T):
                        self.assertEqual(p, "recompute", f"{f} {bf16}")
                for name in ("bmm", "_softmax", "masked_fill"):
                    self.assertEqual(got[name], {"recompute"}, name)
                for name in ("addmm", "native_layer_norm", "relu"):
                    self.assertEqual(got[name], {"save"}, name)
            self.assertEqual(methods.sac_policy(None, object()), "save")
        finally:
            methods.CheckpointPolicy = saved


class Records(unittest.TestCase):
    TINY = ["corpus=synthetic", "d_model=16",
            "n_heads=2", "d_ff=32", "seq_len=8", "batch_size=2", "layers=3",
            "steps=4", "warmup_steps=1", "eval_tokens=32", "threads=1",
            "impl=pytorch"]

    def run_record(self, tmp, method):
        out = os.path.join(tmp, f"{method}.jsonl")
        r = subprocess.run([DEQBENCH, "run", *self.TINY, f"method={method}",
                            f"out={out}"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        v = subprocess.run([DEQBENCH, "validate", "--strict", out],
                           capture_output=True, text=True)
        self.assertEqual(v.returncode, 0, v.stdout + v.stderr)
        with open(out) as f:
            return json.loads(f.readline())

    def test_record_like_unroll(self):
        """deqbench run impl=pytorch method=selective: a valid record
        with unroll's fields (every nested key), unroll's losses (the
        same gradients), L applications and L VJPs a step, and a smaller
        depth peak."""
        with tempfile.TemporaryDirectory() as tmp:
            u = self.run_record(tmp, "unroll")
            s = self.run_record(tmp, "selective")

        def keys(d, pre=""):
            if not isinstance(d, dict):
                return {pre}
            out = {pre}
            for k, v in d.items():
                if k != "series":
                    out |= keys(v, f"{pre}.{k}")
            return out
        self.assertEqual(keys(s), keys(u))
        self.assertEqual(s["method"]["method"], "selective")
        for k in ("train_loss_first", "train_loss_final", "valid_loss",
                  "test_loss"):
            self.assertEqual(s["quality"][k], u["quality"][k], k)
        self.assertEqual(s["evals"], u["evals"])
        self.assertLess(s["memory"]["peak_bytes"]["depth"],
                        u["memory"]["peak_bytes"]["depth"])

    def test_refusals(self):
        for extra, want in ((["model=tanh_cell"], "method=selective"),):
            r = subprocess.run([DEQBENCH, "run", *self.TINY,
                                "method=selective", *extra, "out=/dev/null"],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
            self.assertIn(want, r.stderr)
        for cfg, want in (({"model": "tanh_cell"}, "method=selective"),
                          ({"compile": True}, "compile=true")):
            c = dict(common.DEFAULTS, impl="pytorch", method="selective",
                     **cfg)
            r = subprocess.run([sys.executable, DEQTORCH, "check"],
                               input=json.dumps([c]), capture_output=True,
                               text=True)
            self.assertEqual(r.returncode, 2, r.stderr)
            lines = r.stderr.splitlines()
            self.assertEqual(len(lines), 1, r.stderr)
            self.assertIn(want, lines[0])


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
