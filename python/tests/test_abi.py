"""The ctypes structs match include/nvfp4.h: sizeof and every field's offset,
as the C compiler lays them out."""
import os
import shutil
import subprocess

import pytest

from nvfp4 import _lib
from _helpers import REPO

HEADER = os.path.join(REPO, "include", "nvfp4.h")


def _constants():
    """The header's enum values and constants the bindings restate."""
    c = {"NVFP4_OK": _lib.OK, "NVFP4_DTYPE_U8": _lib.DTYPE_U8,
         "NVFP4_DTYPE_F8_E4M3": _lib.DTYPE_F8_E4M3, "NVFP4_DTYPE_BF16": _lib.DTYPE_BF16,
         "NVFP4_DTYPE_F16": _lib.DTYPE_F16, "NVFP4_DTYPE_F32": _lib.DTYPE_F32,
         "NVFP4_HI_FIRST": _lib.HI_FIRST, "NVFP4_LO_FIRST": _lib.LO_FIRST,
         "NVFP4_SCALES_TILED": _lib.SCALES_TILED, "NVFP4_SCALES_ROW_MAJOR": _lib.SCALES_ROW_MAJOR,
         "NVFP4_VARIANT_EAGER": _lib.VARIANTS["eager"], "NVFP4_VARIANT_CUDA": _lib.VARIANTS["cuda"],
         "NVFP4_MODEL_SM90": _lib.MODELS["sm90"], "NVFP4_MODEL_EXACT": _lib.MODELS["exact"],
         "NVFP4_MODEL_SM120": _lib.MODELS["sm120"], "NVFP4_OPERAND_F16": _lib.OPERAND_F16,
         "NVFP4_OPERAND_BF16": _lib.OPERAND_BF16, "NVFP4_MAX_K_SLICES": _lib.MAX_K_SLICES,
         "NVFP4_ST_MAX_DIMS": _lib.ST_MAX_DIMS, "NVFP4_PACK_HI_FIRST": _lib.PACK_HI_FIRST,
         "NVFP4_PACK_LO_FIRST": _lib.PACK_LO_FIRST, "NVFP4_PACK_GGML_HALVES": _lib.PACK_GGML_HALVES,
         "NVFP4_STORE_TILED": _lib.STORE_TILED, "NVFP4_STORE_ROW_MAJOR": _lib.STORE_ROW_MAJOR,
         "NVFP4_STORE_GGML_BLOCKS": _lib.STORE_GGML_BLOCKS,
         "NVFP4_SCALE_MULTIPLIES": _lib.SCALE_MULTIPLIES, "NVFP4_SCALE_DIVIDES": _lib.SCALE_DIVIDES}
    for name, code in _lib.FORMATS.items():
        c["NVFP4_FORMAT_" + name.upper().replace("-", "_")] = code
    names = ["NVFP4_OK", "NVFP4_ERR_INVALID_ARGUMENT", "NVFP4_ERR_OUT_OF_MEMORY", "NVFP4_ERR_IO",
             "NVFP4_ERR_MALFORMED", "NVFP4_ERR_NOT_FOUND", "NVFP4_ERR_UNSUPPORTED",
             "NVFP4_ERR_NO_DEVICE", "NVFP4_ERR_CUDA", "NVFP4_ERR_INTERNAL"]
    for code, name in enumerate(names):  # errors.BY_STATUS / STATUS_NAMES are keyed 0..9
        c[name] = code
    return c


@pytest.fixture(scope="module")
def c_layout(tmp_path_factory):
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    header = open(HEADER).read()
    lines = ['#include <stddef.h>', '#include <stdio.h>', '#include "nvfp4.h"', "int main(void) {"]
    declared = {}
    for cname, struct in _lib.STRUCTS.items():
        declared[cname] = f"}} {cname};" in header
        if not declared[cname]:
            continue
        lines.append(f'printf("{cname} sizeof %zu\\n", sizeof({cname}));')
        for field, _ in struct._fields_:
            lines.append(f'printf("{cname} {field} %zu\\n", offsetof({cname}, {field}));')
    for name, value in _constants().items():
        lines.append(f'printf("const {name} %lld\\n", (long long)({name}));')
    lines += ["return 0;", "}"]
    d = tmp_path_factory.mktemp("abi")
    src, exe = d / "abi.c", d / "abi"
    src.write_text("\n".join(lines) + "\n")
    subprocess.run([cc, "-std=c11", "-I", os.path.join(REPO, "include"), "-o", str(exe), str(src)],
                   check=True, capture_output=True)
    got = {}
    for line in subprocess.run([str(exe)], check=True, capture_output=True,
                               text=True).stdout.splitlines():
        cname, field, value = line.split()
        got[(cname, field)] = int(value)
    return got, declared


def test_constants(c_layout):
    got, _ = c_layout
    for name, value in _constants().items():
        assert got[("const", name)] == value, f"{name}: header {got[('const', name)]}, bindings {value}"
    from nvfp4 import errors
    assert sorted(errors.BY_STATUS) == list(range(1, 10))


@pytest.mark.parametrize("cname", sorted(_lib.STRUCTS))
def test_struct_layout(c_layout, cname):
    import ctypes
    got, declared = c_layout
    assert declared[cname], f"{cname} is bound in _lib.STRUCTS but not declared in include/nvfp4.h"
    struct = _lib.STRUCTS[cname]
    assert ctypes.sizeof(struct) == got[(cname, "sizeof")], f"{cname}: sizeof"
    for field, _ in struct._fields_:
        assert getattr(struct, field).offset == got[(cname, field)], f"{cname}.{field}: offset"


def test_functions_are_public():
    """Only functions include/nvfp4.h declares are called (the .so exports
    nothing else)."""
    header = open(HEADER).read()
    names = list(_lib._SIGNATURES)
    missing = [n for n in names if f" {n}(" not in header and f"*{n}(" not in header]
    assert not missing, f"not declared in include/nvfp4.h: {missing}"
