#!/usr/bin/env python3
"""Every `sh` and `python` block of README.md runs as written.

The blocks run in document order, in one scratch directory where `build`
is the build under test (so `./build/nvfp4` is the command being tested and
the Python blocks load its libnvfp4.so), each `sh` block with `sh -e` and
each `python` block with python3: a block may use the files an earlier one
made, as a reader following the README would.  A block whose info string
says `no-run` (```sh no-run) is not run and is listed with its first line;
any other fenced block in another language is not code to run.  A block
passes when it exits 0.
Prints one closing line (clitest.summary)."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

from clitest import NVFP4, REPO, check, skip, summary

FENCE = re.compile(r"^```(\S*)(.*)$")


def blocks(text):
    """[(line number, language, runnable, code)] of the fenced blocks."""
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m or not m.group(1):
            i += 1
            continue
        lang, rest, start = m.group(1), m.group(2), i + 1
        i += 1
        code = []
        while i < len(lines) and not lines[i].startswith("```"):
            code.append(lines[i])
            i += 1
        i += 1
        out.append((start, lang, "no-run" not in rest.split(), "\n".join(code) + "\n"))
    return out


def main():
    readme = os.path.join(REPO, "README.md")
    found = blocks(open(readme).read())
    code_blocks = [b for b in found if b[1] in ("sh", "python")]
    check(code_blocks, f"{readme} has sh / python blocks")
    build = os.path.dirname(NVFP4)
    lib = os.path.join(build, "libnvfp4.so")
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"), NVFP4_LIB=lib,
               NVFP4_NO_PROGRESS="1")
    # a sanitizer build's library cannot be loaded into python3, and its
    # command is what the other CLI tests exercise: the README is the
    # plain build's
    loadable = subprocess.run([sys.executable, "-c", f"import ctypes; ctypes.CDLL({lib!r})"],
                              capture_output=True).returncode == 0
    if not loadable:
        skip(f"README blocks: {lib} cannot be loaded by python3 (a sanitizer build); "
             "the plain build runs them")
        return summary("test_readme.py")
    tmp = tempfile.mkdtemp(prefix="nvfp4-readme-")
    try:
        os.symlink(build, os.path.join(tmp, "build"))
        for line, lang, runnable, code in code_blocks:
            first = code.strip().splitlines()[0] if code.strip() else ""
            where = f"README.md:{line} ({lang})"
            if not runnable:
                print(f"not run (marked no-run): {where}: {first}")
                continue
            cmd = ["sh", "-e", "-c", code] if lang == "sh" else [sys.executable, "-c", code]
            r = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=600)
            check(r.returncode == 0, f"{where} exits {r.returncode}: {first}\n"
                                     f"{r.stdout[-2000:]}{r.stderr[-2000:]}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return summary("test_readme.py")


if __name__ == "__main__":
    sys.exit(main())
