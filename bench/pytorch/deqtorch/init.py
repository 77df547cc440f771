"""Initial parameters: deqbench's presets (docs/models.md "Initialisation") drawn
with torch's generator seeded by `seed` (the same distributions as
deqbench's, not the same draws), or loaded from a safetensors file such
as `deqbench params init` writes (then bitwise deqbench's values)."""
import math

import numpy as np
import torch

from . import safetensors
from .config import FIT, ParamsError


def _role(name):
    if name in ("embed.weight", "pos_embed.weight", "head.weight",
                "head.bias", "cell.weight"):
        return name
    if name.startswith("inject."):
        return "inject." + name.split(".")[-1]
    if ".ln" in name:
        return "ln." + name.split(".")[-1]
    return "block." + name.split(".")[-1]


def _fan_in(p):
    return p.shape[1] * (p.shape[2] if p.dim() == 3 else 1)


def _preset(cfg, name, p, weight_of):
    """(kind, a): 'n' N(0, a²), 'u' U(±a), 'c' constant a."""
    kind, init, E = cfg["model"], cfg["init"], cfg["d_model"]
    role = _role(name)
    trellis_deq = init == "deq" and kind == "trellisnet"
    if role == "cell.weight":
        return "n", 0.25 / math.sqrt(cfg["d_model"])
    if role.startswith("ln."):
        return "c", 1.0 if role == "ln.weight" else 0.0
    if role in ("embed.weight", "pos_embed.weight"):
        if trellis_deq:
            return ("u", 0.1) if role == "embed.weight" else ("c", 0.0)
        return {"gpt2": ("n", 0.02), "pytorch": ("n", 1.0),
                "deq": ("n", 0.01 * math.sqrt(E))}[init]
    is_w = role.endswith("weight")
    if init == "pytorch" or (trellis_deq and role.startswith("inject")):
        return "u", 1.0 / math.sqrt(_fan_in(weight_of(name)))
    if trellis_deq and role.startswith("head"):
        return ("u", 0.1) if is_w else ("c", 0.0)
    if trellis_deq:  # block conv weight and bias
        return "n", 0.01
    std = 0.02 if init == "gpt2" else 0.01
    return ("n", std) if is_w else ("c", 0.0)


def _is_weight(name):
    return name in ("inject.weight", "head.weight") or (
        name.startswith("block.") and name.endswith("weight")
        and ".ln" not in name)


def seeded(model, cfg):
    """Fills model's parameters from cfg's preset, init_std and embed_std."""
    params = dict(model.named_parameters())
    gen = torch.Generator().manual_seed(int(cfg["seed"]))
    with torch.no_grad():
        for name, p in params.items():
            kind, a = _preset(cfg, name, p, lambda n: params[
                n[:-len("bias")] + "weight" if n.endswith("bias") else n])
            if cfg["init_std"] > 0 and _is_weight(name):
                kind, a = "n", cfg["init_std"]
            if cfg["embed_std"] > 0 and name in ("embed.weight",
                                                 "pos_embed.weight"):
                kind, a = "n", cfg["embed_std"]
            t = torch.empty(p.shape, dtype=torch.float64)
            if kind == "n":
                t.normal_(0.0, a, generator=gen)
            elif kind == "u":
                t.uniform_(-a, a, generator=gen)
            else:
                t.fill_(a)
            p.copy_(t)


def load(model, path):
    """Loads every parameter of model by name from a safetensors file;
    config.ParamsError naming an unreadable file, a missing tensor or a shape
    that differs. (deqbench checks a params= file with its own loader
    before it starts deqtorch, so what reaches here passed those
    checks.)"""
    try:
        tensors, _ = safetensors.read(path)
    except OSError as e:
        raise ParamsError(f"{path}: {e.strerror or e}; give the path of a "
                          "file written by save_params= or deqbench "
                          "params init") from None
    except ValueError as e:
        raise ParamsError(f"{e}; {FIT}") from None
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name not in tensors:
                raise ParamsError(f"{path}: no tensor '{name}'; {FIT}")
            a = tensors[name]
            if tuple(a.shape) != tuple(p.shape):
                raise ParamsError(f"{path}: tensor '{name}' has shape "
                                  f"{list(a.shape)}, the model "
                                  f"{list(p.shape)}; {FIT}")
            p.copy_(torch.from_numpy(np.array(a, dtype=np.float64)))
