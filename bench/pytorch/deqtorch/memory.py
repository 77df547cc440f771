"""Memory accounting of a PyTorch step on the CPU.

`depth` is measured with torch.autograd.graph.saved_tensors_hooks around
the method's forward: every tensor autograd saves for backward is counted
by its storage (views of one storage once) from the moment it is saved
until autograd releases it (after its backward), parameters' storages
excluded; the live sum's high-water mark is the depth peak. Checkpoint
inputs that torch.utils.checkpoint keeps by reference (not through the
hooks) are added by the method (`hold`). The solver's history tensors are
added while a solve runs (`solver_alloc`), so `peak_depth_solver` is the
high-water mark of both together, as deqbench's allocator reports it.

Under precision=bf16 the saved activations are counted at their own
dtype's size (bfloat16 where autocast ran the op in it, float32 where the
op ran in float32); autocast's bfloat16 copies of the weights (one per
weight and forward, kept by autocast's cache) are not depth, as the
weights are not. Tensors that are not plain (torch.compile's fake tensors
while it traces) are not counted.
"""
import torch

PLAIN = (torch.Tensor, torch.nn.Parameter)


def _key(t):
    s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    return s.data_ptr(), s.nbytes()


class _Held:
    """A saved tensor with its accounting; released when autograd drops
    it (garbage-collected with the graph)."""
    __slots__ = ("t", "key", "tracker")

    def __init__(self, t, key, tracker):
        self.t, self.key, self.tracker = t, key, tracker
        tracker.acquire(key)

    def __del__(self):
        self.tracker.release(self.key)


class HostHeld:
    """A tensor offloaded to host memory (method=offload), counted in the
    tracker's host bytes until dropped."""
    __slots__ = ("t", "nbytes", "tracker", "device")

    def __init__(self, t, device, tracker):
        self.t, self.device, self.tracker = t, device, tracker
        self.nbytes = t.numel() * t.element_size()
        tracker.host_live += self.nbytes
        tracker.peak_host = max(tracker.peak_host, tracker.host_live)

    def __del__(self):
        self.tracker.host_live -= self.nbytes


class Tracker:
    """Live and peak bytes of depth (saved tensors), solver tensors and
    offloaded host tensors."""

    def __init__(self, params=()):
        self.exclude = {_key(p)[0] for p in params}
        self.count, self.live, self.solver_live = {}, 0, 0
        self.peak_depth = self.peak_solver = self.peak_ds = 0
        self.host_live = self.peak_host = 0

    def is_param(self, t):
        return _key(t)[0] in self.exclude

    def is_param_cast(self, t):
        """t (or the tensor it views) is autocast's cast of a parameter: a
        `.to(dtype)` copy whose only input is a parameter's gradient
        accumulator."""
        b = t._base if t._base is not None else t
        gf = b.grad_fn
        if gf is None or type(gf).__name__ != "ToCopyBackward0":
            return False
        nxt = gf.next_functions
        src = nxt[0][0] if nxt else None
        var = getattr(src, "variable", None)
        return var is not None and _key(var)[0] in self.exclude

    def _update(self):
        self.peak_depth = max(self.peak_depth, self.live)
        self.peak_solver = max(self.peak_solver, self.solver_live)
        self.peak_ds = max(self.peak_ds, self.live + self.solver_live)

    def acquire(self, key):
        n = self.count.get(key[0], 0)
        self.count[key[0]] = n + 1
        if n == 0:
            self.live += key[1]
            self._update()

    def release(self, key):
        n = self.count.get(key[0], 0) - 1
        if n <= 0:
            self.count.pop(key[0], None)
            self.live -= key[1]
        else:
            self.count[key[0]] = n

    def _pack(self, t):
        if type(t) not in PLAIN:
            return t
        key = _key(t)
        if key[0] in self.exclude or self.is_param_cast(t):
            return t
        return _Held(t, key, self)

    @staticmethod
    def _unpack(h):
        return h.t if isinstance(h, _Held) else h

    def hooks(self):
        """Context manager counting what autograd saves inside it."""
        return torch.autograd.graph.saved_tensors_hooks(self._pack,
                                                        self._unpack)

    def hold(self, t):
        """Counts t as depth until the returned object is dropped."""
        return _Held(t, _key(t), self)

    def solver_alloc(self, nbytes):
        self.solver_live += nbytes
        self._update()

    def solver_free(self, nbytes):
        self.solver_live -= nbytes
