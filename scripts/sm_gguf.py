#!/usr/bin/python3
"""A minimal GGUF (v2/v3) reader, written from the public format description:
the key/value metadata and the tensor descriptions, for tests and tools.

    import sm_gguf
    kvs, tensors = sm_gguf.read("model.gguf")
    kvs["general.architecture"]     # (value, the entry's raw bytes)
    tensors[0]                      # name, type, shape (row length first), n, offset
"""
import struct

GGML_TYPES = {0: "f32", 1: "f16", 2: "q4_0", 3: "q4_1", 6: "q5_0", 7: "q5_1", 8: "q8_0",
              9: "q8_1", 10: "q2_k", 11: "q3_k", 12: "q4_k", 13: "q5_k", 14: "q6_k", 15: "q8_k",
              20: "iq4_nl", 23: "iq4_xs", 30: "bf16"}
_FIXED = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q",
          11: "<q", 12: "<d"}


def _value(f, vtype):
    if vtype in _FIXED:
        fmt = _FIXED[vtype]
        return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]
    if vtype == 8:
        (n,) = struct.unpack("<Q", f.read(8))
        return f.read(n).decode("utf-8", "replace")
    if vtype == 9:
        et, n = struct.unpack("<IQ", f.read(12))
        return [_value(f, et) for _ in range(n)]
    raise ValueError(f"unknown GGUF value type {vtype}")


def read(path):
    """(kvs, tensors): kvs maps each key to (value, the raw bytes of its whole
    entry, to copy into another file); tensors are dicts with name, type (a
    GGML_TYPES name), shape (GGUF order: row length first), n and the
    absolute byte offset of the data."""
    with open(path, "rb") as f:
        magic, version, nt, nkv = struct.unpack("<4sIQQ", f.read(24))
        if magic != b"GGUF" or version not in (2, 3):
            raise ValueError(f"{path}: not a GGUF v2/v3 file")
        kvs = {}
        for _ in range(nkv):
            start = f.tell()
            (kl,) = struct.unpack("<Q", f.read(8))
            key = f.read(kl).decode()
            (vt,) = struct.unpack("<I", f.read(4))
            value = _value(f, vt)
            end = f.tell()
            f.seek(start)
            kvs[key] = (value, f.read(end - start))
        infos = []
        for _ in range(nt):
            (nl,) = struct.unpack("<Q", f.read(8))
            name = f.read(nl).decode()
            (nd,) = struct.unpack("<I", f.read(4))
            dims = struct.unpack(f"<{nd}Q", f.read(8 * nd))
            tt, off = struct.unpack("<IQ", f.read(12))
            infos.append((name, dims, tt, off))
        align = kvs.get("general.alignment", (32,))[0]
        base = (f.tell() + align - 1) // align * align
    tensors = []
    for name, dims, tt, off in infos:
        n = 1
        for d in dims:
            n *= d
        tensors.append({"name": name, "type": GGML_TYPES.get(tt, str(tt)), "shape": list(dims),
                        "n": n, "offset": base + off})
    return kvs, tensors
