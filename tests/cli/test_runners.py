#!/usr/bin/env python3
"""The test runners cannot pass on nothing: each of tests/run_unit.sh,
tests/cli/run.sh, python/tests/run.sh and tests/gpu/run.sh fails when it
ran no test, and the CLI and Python runners fail when a test only skipped
or left files in its temporary directory.  Their closing lines keep the
form `NAME: N passed, N failed, N skipped` that .ci/run adds up.
Prints one closing line (clitest.summary)."""
import os
import re
import shutil
import subprocess
import sys

from clitest import NVFP4, REPO, check, run_cases

CLOSING = re.compile(r"^(unit|cli|python|gpu): (\d+) passed, (\d+) failed, (\d+) skipped$", re.M)


def sh(script, *args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    r = subprocess.run(["sh", os.path.join(REPO, script), *args], capture_output=True, text=True,
                       env=e, cwd=REPO, timeout=300)
    return r.returncode, r.stdout + r.stderr


def closing(out):
    m = CLOSING.findall(out)
    return tuple(int(v) for v in m[-1][1:]) if m else None


def cases(tmp):
    empty = os.path.join(tmp, "empty")
    os.makedirs(empty)
    rc, out = sh("tests/run_unit.sh", empty)
    check(rc != 0 and "no unit test ran" in out and closing(out) == (0, 1, 0),
          "run_unit.sh on an empty directory fails: " + out)
    rc, out = sh("tests/cli/run.sh", NVFP4, env={"NVFP4_CLI_TESTS": empty})
    check(rc != 0 and "no CLI test ran" in out and closing(out) == (0, 1, 0),
          "cli/run.sh with no script fails: " + out)
    gpu_build = os.path.join(tmp, "gpubuild")
    os.makedirs(gpu_build)
    rc, out = sh("tests/gpu/run.sh", gpu_build, env={"OUT": os.path.join(tmp, "gpulogs")})
    check(rc != 0 and "no test program" in out and closing(out) is not None,
          "gpu/run.sh without test programs fails: " + out)

    # CLI scripts: one that only skips, one that leaves a file behind
    scripts = os.path.join(tmp, "cliscripts")
    os.makedirs(scripts)
    shutil.copy(os.path.join(REPO, "tests", "cli", "clitest.py"), scripts)
    with open(os.path.join(scripts, "test_skips.py"), "w") as f:
        f.write("import sys\nfrom clitest import skip, summary\n"
                "skip('nothing here')\nsys.exit(summary('test_skips.py'))\n")
    rc, out = sh("tests/cli/run.sh", NVFP4, env={"NVFP4_CLI_TESTS": scripts})
    c = closing(out)
    check(rc != 0 and c is not None and c[0] == 0 and c[1] >= 1 and c[2] == 1
          and "SKIP: nothing here" in out,
          "cli/run.sh fails when every check skipped, and says why they skipped: " + out)
    os.unlink(os.path.join(scripts, "test_skips.py"))
    with open(os.path.join(scripts, "test_litter.py"), "w") as f:
        f.write("import sys, tempfile\nfrom clitest import check, summary\n"
                "tempfile.mkdtemp(prefix='litter-')\ncheck(True, 'x')\n"
                "sys.exit(summary('test_litter.py'))\n")
    rc, out = sh("tests/cli/run.sh", NVFP4, env={"NVFP4_CLI_TESTS": scripts})
    check(rc != 0 and "left files in its temporary directory: litter-" in out
          and closing(out) == (1, 1, 0), "cli/run.sh fails a script that leaves files: " + out)

    # Python: nothing collected, and everything skipped
    pyempty = os.path.join(tmp, "pyempty")
    os.makedirs(pyempty)
    env = {"NVFP4_PYTHON_TESTS": pyempty}
    rc, out = sh("python/tests/run.sh", env=env)
    check(rc != 0 and closing(out) is not None and closing(out)[0] == 0,
          "python/tests/run.sh with no test fails: " + out)
    with open(os.path.join(pyempty, "test_only_skips.py"), "w") as f:
        f.write("import pytest\n\ndef test_a():\n    pytest.skip('no such machine')\n")
    rc, out = sh("python/tests/run.sh", env=env)
    check(rc != 0 and closing(out) == (0, 1, 1) and "no such machine" in out,
          "python/tests/run.sh fails when every test skipped, and prints why: " + out)


if __name__ == "__main__":
    sys.exit(run_cases("test_runners.py", cases, "nvfp4-runners-"))
