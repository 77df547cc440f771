"""A small safetensors reader and writer (numpy arrays; no torch).

Format (huggingface/safetensors): u64 little-endian header length, a JSON
header {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__":
{str: str}}, then the raw little-endian data. Debian 12 ships no
python3-safetensors, hence this file. Errors raise ValueError naming the
file and what is wrong.
"""
import json
import os
import struct

import numpy as np

_DTYPES = {"F32": np.dtype("<f4"), "F64": np.dtype("<f8"),
           "I32": np.dtype("<i4"), "I64": np.dtype("<i8")}


def read(path):
    """Returns ({name: np.ndarray}, metadata dict) of the file at path."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: not a safetensors file (too short)")
    (hlen,) = struct.unpack("<Q", raw[:8])
    if hlen > len(raw) - 8:
        raise ValueError(f"{path}: header length {hlen} beyond the file")
    try:
        head = json.loads(raw[8:8 + hlen])
    except ValueError as e:
        raise ValueError(f"{path}: malformed header ({e})") from None
    base = 8 + hlen
    meta = head.pop("__metadata__", None) or {}
    out = {}
    for name, t in head.items():
        dt = _DTYPES.get(t.get("dtype"))
        if dt is None:
            raise ValueError(f"{path}: tensor '{name}' has unsupported "
                             f"dtype {t.get('dtype')}")
        b, e = t["data_offsets"]
        shape = tuple(int(s) for s in t["shape"])
        n = int(np.prod(shape)) if shape else 1
        if e - b != n * dt.itemsize or base + e > len(raw):
            raise ValueError(f"{path}: tensor '{name}' has bad offsets")
        out[name] = np.frombuffer(raw, dt, n, base + b).reshape(shape)
    return out, meta


def write(path, tensors, metadata=None):
    """Writes {name: np.ndarray} (float32/float64/int32/int64) with string
    metadata to path, through a temporary file renamed into place (removed
    again when the write or the rename fails)."""
    names = {v: k for k, v in _DTYPES.items()}
    head, blobs, off = {}, [], 0
    for name, a in tensors.items():
        a = np.ascontiguousarray(a)
        dt = a.dtype.newbyteorder("<")
        if dt not in names:
            raise ValueError(f"{path}: tensor '{name}' dtype {a.dtype}")
        b = a.astype(dt).tobytes()
        head[name] = {"dtype": names[dt], "shape": list(a.shape),
                      "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    if metadata:
        head["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    hj = json.dumps(head, separators=(",", ":")).encode()
    hj += b" " * (-len(hj) % 8)
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(hj)) + hj)
            for b in blobs:
                f.write(b)
        os.replace(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise
