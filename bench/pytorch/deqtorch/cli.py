"""Commands of deqtorch.py: check, run, eval, grad (README.md beside this
package gives the stdin/stdout contract). Exit status: 0 done (a diverged
or interrupted run included), 1 a run failed at run time (its record says
why), 2 bad input, with one line on stderr."""
import json
import math
import sys
import time

from . import config, interrupt
from .common import bad


def cmd_check(stdin):
    try:
        cfgs = json.loads(stdin)
    except ValueError as e:
        return bad(f"deqtorch: stdin is not JSON ({e}); pass a JSON array "
                   "of resolved configs")
    if not isinstance(cfgs, list):
        return bad("deqtorch: check reads a JSON array of configs; wrap "
                   "the config in [ ]")
    try:
        for c in cfgs:
            config.check_config(c)
    except config.Unsupported as e:
        return bad(str(e))
    return 0


def _threads(cfg):
    import torch
    if cfg.get("threads", 0) > 0:
        torch.set_num_threads(cfg["threads"])


def _load_splits(req):
    from . import data
    d = req["data"]
    return [data.read_ids(d[k]) for k in ("train", "valid", "test")]


def _setup(req):
    """(ctx, splits, batcher) or raises ValueError / OSError (bad input)."""
    from . import data, train
    cfg = req["config"]
    config.check_config(cfg)
    config.normalise(cfg)
    if cfg["device"] == "cuda":
        import torch
        if not torch.cuda.is_available():
            raise config.Unsupported(
                "deqtorch: device=cuda is not supported by impl=pytorch "
                "here; torch.cuda.is_available() is false: use device=cpu")
    _threads(cfg)
    splits = _load_splits(req)
    V = cfg["vocab_size"] or req["data"]["vocab_size"]
    if int(max(s.max(initial=0) for s in splits)) >= V:
        raise ValueError(f"token ids reach the vocabulary size {V}; set "
                         "vocab_size=0 or at least the corpus's")
    ctx = train.Ctx(cfg, V, req.get("init_params"))
    return ctx, splits, data.Batcher(splits[0], cfg["batch_size"],
                                     cfg["seq_len"])


def _record(req, ctx, splits, log, ev, times):
    import torch
    from . import record as R
    cfg = ctx.cfg
    return {
        "impl": "pytorch-" + torch.__version__, "kind": "train",
        "status": log.status, "message": log.message,
        "started_at": times["start"], "finished_at": R.utc_now(),
        "config": cfg, "method": R.method_json(cfg),
        "model": R.model_json(ctx), "data": R.data_json(req, splits, cfg),
        "timing": R.timing_json(ctx, log, times["setup"], times["eval"]),
        "memory": R.memory_json(ctx), "solver": R.solver_json(log),
        "evals": R.evals_json(log), "work": None,
        "quality": R.quality_json(ctx, log, ev),
        "inference": R.inference_json(ctx, ev, times["eval"]),
        "device": R.device_json(ctx),
        "trace": R.trace_json(log) if cfg.get("trace") else None,
        "pretrain": R.pretrain_json(ctx, log),
        "plan": None,
        "compile": getattr(ctx, "compile", None),
    }


def _request(stdin, what, need_params=False):
    """(req, ctx, splits, batcher) of a run/eval request, or the exit
    status of bad input (one stderr line)."""
    try:
        req = json.loads(stdin)
        if need_params and not req["config"].get("params"):
            raise ValueError("params= is missing")
        return (req,) + _setup(req)
    except config.Unsupported as e:
        return bad(str(e))
    except config.ParamsError as e:
        return bad(f"deqtorch: {e}")
    except KeyError as e:
        return bad(f"deqtorch: bad {what} input: no key {e}; pass "
                   f"{REQUEST_SHAPE} as bench/pytorch/README.md says")
    except (ValueError, OSError, TypeError) as e:
        return bad(f"deqtorch: bad {what} input: {e}; pass "
                   f"{REQUEST_SHAPE} as bench/pytorch/README.md says")


# The request's shape as bench/pytorch/README.md ("Commands") writes it.
REQUEST_SHAPE = '{"config": CONFIG, "data": DATA}'


def _finite(x):
    """x with every non-finite float replaced by None: JSON has no NaN or
    infinity (deqbench could not read the record)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


def print_record(rec):
    """Prints rec as the one JSON line of stdout (non-finite numbers as
    null)."""
    print(json.dumps(_finite(rec), allow_nan=False), flush=True)


def _evaluate(ctx, splits, log):
    """The valid and test evaluation of a run whose training ended ok (log
    says how it ended); a SIGINT/SIGTERM during it makes log interrupted
    and leaves the rest unevaluated (bench/run/evaluate.c)."""
    from . import train
    empty = (None, 0, [], [], [])
    ev = {"valid": empty, "test": empty}
    if log.status != "ok" or ctx.cfg["eval_tokens"] <= 0:
        return ev
    ev["valid"] = train.evaluate(ctx, splits[1], True)
    if not getattr(ctx, "eval_cut", False):
        ev["test"] = train.evaluate(ctx, splits[2])
    if getattr(ctx, "eval_cut", False):
        log.status = "interrupted"
        log.message = (f"interrupted by {interrupt.name()} during "
                       "evaluation")
    return ev


def _save(ctx, log):
    """save_params= of an ok run (bench/run/runner.c save_params): a failed
    write makes the run an error with the reason; its statistics stay."""
    path = ctx.cfg.get("save_params")
    if not path or log.status != "ok":
        return
    try:
        save_params(ctx, path)
    except (OSError, ValueError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror \
            else str(e)
        log.status = "error"
        log.message = f"save_params={path}: {reason}"


def cmd_run(stdin):
    from . import record, train
    interrupt.install()
    times = {"start": record.utc_now()}
    t0 = time.perf_counter()
    got = _request(stdin, "run")
    if isinstance(got, int):
        return got
    req, ctx, splits, batcher = got
    times["setup"] = time.perf_counter() - t0
    log = train.train(ctx, batcher)
    t1 = time.perf_counter()
    ev = _evaluate(ctx, splits, log)
    times["eval"] = time.perf_counter() - t1
    _save(ctx, log)
    print_record(_record(req, ctx, splits, log, ev, times))
    return 1 if log.status == "error" else 0


def _eval_record(req, ctx, splits, ev, times, log):
    """The record of `eval`: no training, so timing, memory, solver,
    evals, trace and pretrain are null and quality's training fields null
    or 0; inference carries the valid evaluation (SCHEMA.md kind eval);
    log gives the status and message."""
    import torch
    from . import record as R, train
    q = R.quality_json(ctx, train.Log(), ev)
    q["train_loss_final"] = q["train_loss_first"] = None
    return {
        "impl": "pytorch-" + torch.__version__, "kind": "eval",
        "status": log.status, "message": log.message,
        "started_at": times["start"],
        "finished_at": R.utc_now(), "config": ctx.cfg,
        "method": R.method_json(ctx.cfg), "model": R.model_json(ctx),
        "data": R.data_json(req, splits, ctx.cfg), "timing": None,
        "memory": None, "solver": None, "evals": None, "work": None,
        "quality": q,
        "inference": R.inference_json(ctx, ev, times["eval"]),
        "device": R.device_json(ctx), "trace": None, "pretrain": None,
        "plan": None,
    }


def cmd_eval(stdin):
    """`deqbench eval` of impl=pytorch: the parameters of config key
    params evaluated on the valid and test splits, no training."""
    from . import record, train
    interrupt.install()
    times = {"start": record.utc_now()}
    got = _request(stdin, "eval", need_params=True)
    if isinstance(got, int):
        return got
    req, ctx, splits, _ = got
    t0 = time.perf_counter()
    log = train.Log()
    ev = _evaluate(ctx, splits, log)
    times["eval"] = time.perf_counter() - t0
    print_record(_eval_record(req, ctx, splits, ev, times, log))
    return 0


def save_params(ctx, path):
    from . import safetensors
    t = {n: p.detach().float().cpu().numpy()
         for n, p in ctx.model.named_parameters()}
    safetensors.write(path, t, {"format": "pt", "config":
                                json.dumps(ctx.cfg, sort_keys=True)})


def main(argv):
    if len(argv) < 2 or argv[1] not in ("check", "run", "eval", "grad"):
        return bad("deqtorch: usage: deqtorch.py check|run|eval < JSON, "
                   "or deqtorch.py grad key=value ... params=P tokens=T "
                   "out=G")
    if argv[1] == "grad":
        from . import grad
        return grad.cmd_grad(argv[2:])
    stdin = sys.stdin.read()
    return {"check": cmd_check, "run": cmd_run,
            "eval": cmd_eval}[argv[1]](stdin)
