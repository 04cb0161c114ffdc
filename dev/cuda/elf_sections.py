#!/usr/bin/env python3
"""elf_sections.py -- compare the code of two builds of a CUDA source, section
by section: whether a change left the kernels' machine code as it was.

    python3 dev/cuda/elf_sections.py OLD.cubin NEW.cubin [--all]

Each file is a cubin (nvcc -cubin ... -o X.cubin SRC.cu).  Prints every
.text section (one per kernel) whose bytes differ, or that only one side
has, and a summary line; exit status 1 when any differ.  --all compares
every section, not only .text (.strtab and the like differ with any
rename).  Reads the ELF64 headers itself: binutils' objcopy does not
recognise a cubin and writes nothing, so hashing its output compares
nothing.
"""
import hashlib
import struct
import sys


def sections(path):
    """{name: (size, md5)} of an ELF64 little-endian file's sections."""
    data = open(path, "rb").read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        sys.exit(f"elf_sections: {path} is not a little-endian ELF64 file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if shoff == 0 or shnum == 0 or shoff + shnum * shentsize > len(data):
        sys.exit(f"elf_sections: {path} has no readable section headers")
    heads = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    str_off, str_size = heads[shstrndx][4], heads[shstrndx][5]

    def name_at(off):
        end = data.index(b"\0", str_off + off)
        return data[str_off + off:end].decode()

    out = {}
    for name, typ, _flags, _addr, off, size in heads:
        body = b"" if typ == 8 else data[off:off + size]  # SHT_NOBITS holds no bytes
        out[name_at(name)] = (size, hashlib.md5(body).hexdigest())
    return out


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    if len(args) != 2:
        sys.exit(__doc__)
    old, new = sections(args[0]), sections(args[1])
    pick = (lambda n: True) if "--all" in argv else (lambda n: n.startswith(".text."))
    names = sorted(n for n in set(old) | set(new) if pick(n))
    if not names:
        sys.exit("elf_sections: no sections to compare")
    differ = 0
    for n in names:
        a, b = old.get(n), new.get(n)
        if a == b:
            continue
        differ += 1
        if a is None or b is None:
            print(f"{n}: only in {'new' if a is None else 'old'}")
        else:
            print(f"{n}: {a[0]} -> {b[0]} bytes, contents differ")
    same = sum(1 for n in names if old.get(n) == new.get(n))
    print(f"{same} of {len(names)} sections identical, {differ} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
