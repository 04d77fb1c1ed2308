#!/usr/bin/env python3
"""Reads safetensors files with Python's standard library only (no torch,
no safetensors package), checks their layout, and lists their tensors:

    python3 scripts/safetensors_read.py FILE...

Per file a line "# FILE: N tensors" and the metadata as "# key=value"
lines (sorted), then one line per tensor in data order:

    NAME DTYPE [D0,D1,...] NBYTES FNV64

FNV64 is the FNV-1a hash of the tensor's bytes, in hex. tests/weights_cli.sh
compares this listing with the C reader's (tests/st_dump.c) for files that
`tcbench weights` wrote. Exit status 2 and one line naming the file on a
malformed file."""
import json
import struct
import sys

SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4,
         "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}


def fnv64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    return h


def read(path):
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError("shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", blob[:8])
    if n < 2 or n > len(blob) - 8:
        raise ValueError("header length %d does not fit %d bytes" % (n, len(blob)))
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    if not isinstance(header, dict):
        raise ValueError("header is not a JSON object")
    meta = header.pop("__metadata__", {})
    data = blob[8 + n:]
    entries = []
    for name, e in header.items():
        dtype, shape, (begin, end) = e["dtype"], e["shape"], e["data_offsets"]
        if dtype not in SIZES:
            raise ValueError("tensor %s: unknown dtype %s" % (name, dtype))
        numel = 1
        for d in shape:
            numel *= d
        if end - begin != numel * SIZES[dtype] or begin < 0 or end > len(data):
            raise ValueError("tensor %s: offsets [%d, %d] do not hold %s %s"
                             % (name, begin, end, dtype, shape))
        entries.append((begin, end, name, dtype, shape))
    entries.sort()
    at = 0
    for begin, end, name, _, _ in entries:
        if begin != at:
            raise ValueError("tensor %s starts at %d, expected %d" % (name, begin, at))
        at = end
    if at != len(data):
        raise ValueError("%d bytes after the last tensor" % (len(data) - at))
    return meta, [(name, dtype, shape, data[b:e]) for b, e, name, dtype, shape in entries]


def main(argv):
    if not argv:
        sys.stderr.write("usage: safetensors_read.py FILE...\n")
        return 2
    for path in argv:
        try:
            meta, tensors = read(path)
        except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
            sys.stderr.write("%s: %s\n" % (path, e))
            return 2
        print("# %s: %d tensors" % (path, len(tensors)))
        for k in sorted(meta):
            print("# %s=%s" % (k, meta[k]))
        for name, dtype, shape, data in tensors:
            print("%s %s [%s] %d %016x" % (name, dtype, ",".join(str(d) for d in shape),
                                          len(data), fnv64(data)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
