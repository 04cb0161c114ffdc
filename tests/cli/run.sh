#!/bin/sh
# CLI tests: expected outputs, exit codes, golden quantizer cases through the
# command line, malformed files; `explain` in its own file.
# Usage: tests/cli/run.sh path/to/nvfp4
rc=0
python3 "$(dirname "$0")/test_cli.py" "${1:-build/nvfp4}" || rc=1
python3 "$(dirname "$0")/test_explain.py" "${1:-build/nvfp4}" || rc=1
exit $rc
