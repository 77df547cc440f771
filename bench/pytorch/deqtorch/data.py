"""deqbench's token-id cache files and its ordered batcher (numpy).

.ids (bench/data/data_cache.c; little-endian, 56-byte header): char[8] magic
"DQTOKIDS", u32 version 1, u32 vocab size, u64 token count n, u64 FNV-1a
of the ids, u64 source fingerprint, u64 vocab checksum, u32 split, u32
documents, then int32 ids[n]. The checksum is not verified here (deqbench
wrote and checked the file).
"""
import struct

import numpy as np

MAGIC = b"DQTOKIDS"
HEADER = 56


def read_ids(path):
    """int32 token ids of a .ids cache file; ValueError when malformed."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < HEADER or raw[:8] != MAGIC:
        raise ValueError(f"{path}: not a deqbench .ids cache file")
    version, _vocab, n = struct.unpack_from("<IIQ", raw, 8)
    if version != 1 or len(raw) != HEADER + 4 * n:
        raise ValueError(f"{path}: version {version} or size does not "
                         f"match {n} tokens")
    return np.frombuffer(raw, "<i4", n, HEADER).astype(np.int64)


def write_ids(path, ids, vocab_size):
    """Writes ids as a .ids file (checksums 0; for tests)."""
    ids = np.asarray(ids, dtype="<i4")
    head = MAGIC + struct.pack("<IIQQQQII", 1, vocab_size, ids.size,
                               0, 0, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(head + ids.tobytes())


class Batcher:
    """B contiguous streams of ids read in windows of T+1 tokens, in order,
    wrapping at the end (bench/data/data_batch.c, the DEQ / Transformer-XL
    LMOrderedIterator). ValueError when the split holds no batch."""

    def __init__(self, ids, B, T):
        self.stream_len = len(ids) // B
        if B < 1 or T < 1 or self.stream_len < T + 1:
            raise ValueError(f"{len(ids)} tokens hold no batch of "
                             f"{B} x {T + 1}")
        self.ids, self.B, self.T = ids, B, T
        self.n_batches = (self.stream_len - 1) // T
        self.next = 0

    def get(self, k):
        """Batch k as an int64 array (B, T+1)."""
        s = np.arange(self.B)[:, None] * self.stream_len + k * self.T
        return self.ids[s + np.arange(self.T + 1)[None, :]]

    def next_batch(self):
        """The next training batch, wrapping after the last."""
        b = self.get(self.next)
        self.next = (self.next + 1) % self.n_batches
        return b
