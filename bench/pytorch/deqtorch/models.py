"""deqbench's three weight-tied models (docs/ARCHITECTURE.md §Model) as
torch modules with deqbench's parameter names, order and layouts.

Each model has inject(tokens) -> u, f(z, u) -> f(z; u) (the block), z0(u)
(the zero state), head_loss(z, targets) and an `evals` counter of block
applications (recomputations included). The state is batch-first
(B, T, d); trellisnet's is (B, T, 2h) = [h | c] per position (deqbench
stores h and c planar; the math is the same, and solvers group per sample).

precision=bf16 (autocast(bfloat16) around the forward, train.Ctx): the
weights stay float32 (autocast casts them for the GEMMs); the LayerNorms
take float32 inputs, as CUDA autocast's float32 list does and as CPU
autocast in torch 1.13 would not (it has no mixed-dtype layer_norm), so
the transformer's state and residual stream stay float32; the attention
softmax is taken in float32 (explicit attention) or by
scaled_dot_product_attention where torch has it (also in float32 with
compile=true); z0 is of the weights' dtype. Without autocast every one
of these casts is a no-op.
"""
import contextlib
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class _TransformerBlock(nn.Module):
    """Post-LN DEQ-Transformer block: qkv = z Wqkvᵀ + b + u, causal MHA,
    h = LN1(z + a Woᵀ + b), f = LN2(h + relu(h W1ᵀ + b1) W2ᵀ + b2)."""

    def __init__(self, d, H, Fw):
        super().__init__()
        self.attn = nn.Module()
        self.attn.qkv = nn.Linear(d, 3 * d)
        self.attn.out = nn.Linear(d, d)
        self.ln1 = nn.LayerNorm(d, eps=1e-5)
        self.ff1 = nn.Linear(d, Fw)
        self.ff2 = nn.Linear(Fw, d)
        self.ln2 = nn.LayerNorm(d, eps=1e-5)
        self.H = H
        # scaled_dot_product_attention(is_causal=True) for the attention
        # (build: precision=bf16 where torch >= 2 has it)
        self.sdpa = False
        # method=selective on torch < 2.4 (methods.Selective): a wrapper
        # core(attend, q, k, v) around the attention core, else None
        self.core = None

    def attend(self, q, k, v):
        """The attention core (B, H, T, dh) -> (B, H, T, dh): q kᵀ / √dh,
        the causal softmax, att·v; what method=selective recomputes."""
        T, dh = q.shape[2], q.shape[3]
        if self.sdpa:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        s = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(dh))
        mask = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)
        s = s.masked_fill(mask, float("-inf"))
        # bf16 scores: the softmax in float32 (a no-op otherwise)
        s = s.to(torch.promote_types(s.dtype, torch.float32))
        return torch.matmul(s.softmax(-1), v)

    def forward(self, z, u):
        B, T, d = z.shape
        H, dh = self.H, d // self.H
        qkv = self.attn.qkv(z) + u
        q, k, v = (t.reshape(B, T, H, dh).transpose(1, 2)
                   for t in qkv.split(d, dim=-1))
        if self.core is None:
            a = self.attend(q, k, v)
        else:
            a = self.core(self.attend, q, k, v)
        a = a.transpose(1, 2).reshape(B, T, d)
        h = _ln(self.ln1, z + self.attn.out(a))
        return _ln(self.ln2, h + self.ff2(torch.relu(self.ff1(h))))


def _ln(ln, x):
    """LayerNorm ln of x in the weights' dtype (float32 under bf16
    autocast; a no-op cast otherwise)."""
    return ln(x if x.dtype == ln.weight.dtype else x.to(ln.weight.dtype))


def _shift(y):
    """y[t-1] along dim 1 with y[-1] = 0."""
    return F.pad(y, (0, 0, 1, 0))[:, :-1]


def _conv_k2(y, w, b):
    """Conv1d_k2(y)[t] = W[:,:,0] y[t-1] + W[:,:,1] y[t] (+ b), y (B,T,C)."""
    return F.linear(_shift(y), w[:, :, 0]) + F.linear(y, w[:, :, 1], b)


class _TrellisBlock(nn.Module):
    """TrellisNet layer with LSTM gates (models/trellisnet.c)."""

    def __init__(self, h):
        super().__init__()
        self.conv = nn.Conv1d(h, 4 * h, 2)
        self.h = h

    def forward(self, z, u):
        h = self.h
        hh, c = z[..., :h], z[..., h:]
        pre = u + _conv_k2(hh, self.conv.weight, self.conv.bias)
        i, o, g, f = pre.split(h, dim=-1)
        c2 = torch.sigmoid(f) * _shift(c) + torch.sigmoid(i) * torch.tanh(g)
        return torch.cat((torch.sigmoid(o) * torch.tanh(c2), c2), dim=-1)


class LM(nn.Module):
    """Embeddings, injection, the kind's block and the LM head."""

    def __init__(self, kind, V, d, H, Fw, T):
        super().__init__()
        self.kind, self.E, self.evals = kind, d, 0
        self.embed = nn.Embedding(V, d)
        self.pos_embed = nn.Embedding(T, d)
        if kind == "transformer":
            self.inject = nn.Linear(d, 3 * d)
            self.block = _TransformerBlock(d, H, Fw)
            self.d_state = d
        elif kind == "tanh_cell":
            self.inject = nn.Linear(d, d)
            self.cell = nn.Linear(d, d, bias=False)
            self.d_state = d
        elif kind == "trellisnet":
            self.inject = nn.Conv1d(d, 4 * d, 2)
            self.block = _TrellisBlock(d)
            self.d_state = 2 * d
        else:
            raise ValueError(f"model={kind}")
        # deqbench's state layout: this many planar blocks (h, c)
        self.state_parts = 2 if kind == "trellisnet" else 1
        self.head = nn.Linear(d, V)
        self.compiled = None  # torch.compile of _block (compile=true)

    def inject_u(self, tokens):
        """u (B,T,U) of input tokens (B,T)."""
        T = tokens.shape[1]
        x = self.embed(tokens) + self.pos_embed.weight[:T]
        if self.kind == "trellisnet":
            return _conv_k2(x, self.inject.weight, self.inject.bias)
        return self.inject(x)

    def _block(self, z, u):
        if self.kind == "tanh_cell":
            return torch.tanh(self.cell(z) + u)
        return self.block(z, u)

    def f(self, z, u, eager=False):
        """One application of the weight-tied block: the torch.compile'd
        one with compile=true unless eager (the Jacobian regulariser's
        double backward, which compiled graphs do not support)."""
        self.evals += 1
        if self.compiled is not None and not eager:
            return self.compiled(z, u)
        return self._block(z, u)

    def compile_block(self):
        """compile=true: the block through torch.compile (torch >= 2). The
        evals counter stays outside the compiled function."""
        self.compiled = torch.compile(self._block)

    def z0(self, u):
        """The zero state, of the weights' dtype (float32 under bf16
        autocast, where u is bfloat16)."""
        return u.new_zeros(u.shape[0], u.shape[1], self.d_state,
                           dtype=self.head.weight.dtype)

    def logits(self, z):
        return self.head(z[..., :self.E])

    def head_loss(self, z, targets, chunk=0):
        """Mean next-token cross-entropy (nats) and the logits; with chunk
        K > 0 (head_chunk) the loss of _ChunkedHead and no logits."""
        if chunk > 0:
            # in the weights' dtype without autocast (a custom Function
            # in float32, as cross_entropy runs under autocast)
            w = self.head.weight
            zc = z[..., :self.E].reshape(-1, self.E).to(w.dtype)
            with _no_autocast(z.device.type):
                return _ChunkedHead.apply(zc, w, self.head.bias,
                                          targets.reshape(-1), chunk,
                                          torch.is_grad_enabled()), None
        lg = self.logits(z)
        return F.cross_entropy(lg.reshape(-1, lg.shape[-1]),
                               targets.reshape(-1)), lg


class _ChunkedHead(torch.autograd.Function):
    """head_chunk=K as deqbench's (docs/models.md "head_chunk"): the head's
    softmax-cross-entropy K positions at a time, each chunk's logits,
    loss and gradient in one pass, so only K·V logits (then their
    gradient) are live and nothing is recomputed. The forward already
    forms dL/dz (N,E), dL/dW and dL/db of the mean loss; the backward
    scales them by the upstream gradient. want (grad mode at the call):
    without it only the loss."""

    @staticmethod
    def forward(ctx, z, W, b, targets, K, want):
        N = z.shape[0]
        total = z.new_zeros((), dtype=torch.float64)
        dz = torch.empty_like(z) if want else None
        dW = torch.zeros_like(W) if want else None
        db = torch.zeros_like(b) if want else None
        for s in range(0, N, K):
            zc, tc = z[s:s + K], targets[s:s + K]
            lg = torch.addmm(b, zc, W.t())
            lp = torch.log_softmax(lg, dim=1)
            total += -lp.gather(1, tc[:, None]).sum().double()
            if want:
                g = lp.exp_()  # the softmax, in place of the logits
                g[torch.arange(g.shape[0]), tc] -= 1.0
                g /= N
                dz[s:s + K] = g @ W
                dW.addmm_(g.t(), zc)
                db += g.sum(0)
        ctx.save_for_backward(dz, dW, db)
        return (total / N).to(z.dtype)

    @staticmethod
    def backward(ctx, gl):
        dz, dW, db = ctx.saved_tensors
        return gl * dz, gl * dW, gl * db, None, None, None


def _no_autocast(device_type):
    """autocast disabled for device_type (a no-op outside autocast)."""
    return torch.autocast(device_type=device_type, enabled=False)


def autocast(cfg, device_type):
    """The context of the forward: autocast(bfloat16) with
    precision=bf16, else nothing."""
    if cfg.get("precision") == "bf16":
        return torch.autocast(device_type=device_type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def build(cfg, V, dtype, device):
    """The model of config cfg with vocabulary V, uninitialised."""
    m = LM(cfg["model"], V, cfg["d_model"], cfg["n_heads"], cfg["d_ff"],
           cfg["seq_len"])
    if cfg["model"] == "transformer":
        # fused causal attention under bf16, and in every precision with
        # compile=true, where torch has it; not with the Jacobian
        # regulariser, whose double backward the fused kernels do not
        # support
        m.block.sdpa = ((cfg.get("precision") == "bf16"
                         or bool(cfg.get("compile", False)))
                        and hasattr(F, "scaled_dot_product_attention")
                        and cfg.get("jac_loss_weight", 0.0) == 0)
    return m.to(device=device, dtype=dtype)
