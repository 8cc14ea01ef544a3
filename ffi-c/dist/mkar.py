#!/usr/bin/env python3
"""Write a GNU ar archive of one object with its symbol index.

    mkar.py OUT.a OBJECT.o SYMBOL...

binutils' ar loads every plugin in bfd-plugins, and LLVM's gold plugin aborts
on the object `ld -r` makes of a Rust static library, so dist.sh writes the
archive itself: the format is a global header, an index member ("/": symbol
count, each symbol's member offset, the names) and the object.
"""
import os
import struct
import sys


def header(name: str, size: int) -> bytes:
    h = f"{name:<16}{0:<12}{0:<6}{0:<6}{644:<8}{size:<10}`\n".encode()
    assert len(h) == 60
    return h


def main() -> None:
    out, obj, symbols = sys.argv[1], sys.argv[2], sys.argv[3:]
    data = open(obj, "rb").read()
    member = os.path.basename(obj)[:15] + "/"
    names = b"".join(s.encode() + b"\0" for s in symbols)
    index_size = 4 + 4 * len(symbols) + len(names)
    index_pad = index_size % 2
    member_offset = 8 + 60 + index_size + index_pad
    index = struct.pack(">I", len(symbols)) + struct.pack(">I", member_offset) * len(symbols) + names
    with open(out, "wb") as f:
        f.write(b"!<arch>\n")
        f.write(header("/", index_size))
        f.write(index + b"\n" * index_pad)
        f.write(header(member, len(data)))
        f.write(data + b"\n" * (len(data) % 2))


if __name__ == "__main__":
    main()
