"""`deqtorch.py grad`, mirroring `deqbench grad`: the loss (float32 [1])
and every parameter's gradient (`grad.<name>`, float32) of one step on
tokens (int32 [B, T+1]) from parameters P, with the configured method."""
import json
import sys

import numpy as np

from . import config, safetensors
from .common import DEFAULTS, bad


def parse_args(args):
    """(cfg with defaults, params path, tokens path, out path)."""
    cfg, paths = dict(DEFAULTS), {}
    for a in args:
        if "=" not in a:
            raise ValueError(f"argument '{a}' is not key=value")
        k, v = a.split("=", 1)
        if k in ("params", "tokens", "out"):
            paths[k] = v
            continue
        if k not in cfg:
            raise config.Unsupported(
                f"deqtorch: {k}={v} is not supported by impl=pytorch; "
                "remove the key")
        d = cfg[k]
        cfg[k] = (v == "true") if isinstance(d, bool) else \
            type(d)(float(v)) if isinstance(d, (int, float)) else v
    for k in ("params", "tokens", "out"):
        if not paths.get(k):
            raise ValueError(f"{k}= is missing")
    return cfg, paths["params"], paths["tokens"], paths["out"]


def loss_and_grads(cfg, params_path, tokens):
    """(loss float, {name: grad ndarray float64}, ctx) for tokens
    (B, T+1) int array; the model sized by the parameter file."""
    import torch
    from . import train
    tensors, _ = safetensors.read(params_path)
    V, T = tensors["embed.weight"].shape[0], tensors[
        "pos_embed.weight"].shape[0]
    cfg = dict(cfg, vocab_size=V, seq_len=T, batch_size=tokens.shape[0])
    ctx = train.Ctx(cfg, V, params_path)
    loss, _ = ctx.loss(torch.as_tensor(np.asarray(tokens, np.int64)), True)
    ctx.method.objective(loss).backward()
    g = {n: p.grad.detach().double().numpy()
         for n, p in ctx.model.named_parameters()}
    return float(loss), g, ctx


def cmd_grad(args):
    try:
        cfg, pp, tp, out = parse_args(args)
        config.check_config(cfg)
        config.normalise(cfg)
        tok = safetensors.read(tp)[0]["tokens"]
        if cfg["threads"] > 0:
            import torch
            torch.set_num_threads(cfg["threads"])
        loss, g, ctx = loss_and_grads(cfg, pp, tok)
    except config.Unsupported as e:
        return bad(str(e))
    except (ValueError, OSError, KeyError) as e:
        return bad(f"deqtorch: grad: {e}; see README.md")
    for k in ("fwd", "bwd"):
        st = ctx.method.last[k]
        if st is not None:
            print(f"deqtorch grad: {k} solve: {st.iters} iters, residual "
                  f"{st.residual:.3g}, converged {st.converged}",
                  file=sys.stderr)
    t = {"loss": np.array([loss], np.float32)}
    t.update({"grad." + n: a.astype(np.float32) for n, a in g.items()})
    safetensors.write(out, t, {"writer": "deqtorch",
                               "config": json.dumps(cfg, sort_keys=True)})
    return 0
