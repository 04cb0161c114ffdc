#!/bin/sh
# CLI tests: expected outputs, exit codes, golden quantizer cases through the
# command line, malformed files; `explain` and the checkpoint formats in
# their own files.
# Usage: tests/cli/run.sh path/to/nvfp4
rc=0
python3 "$(dirname "$0")/test_cli.py" "${1:-build/nvfp4}" || rc=1
python3 "$(dirname "$0")/test_explain.py" "${1:-build/nvfp4}" || rc=1
python3 "$(dirname "$0")/test_formats.py" "${1:-build/nvfp4}" || rc=1
exit $rc
