#!/bin/sh
# CLI tests: expected outputs, exit codes, golden quantizer cases through the
# command line, malformed files.  Usage: tests/cli/run.sh path/to/nvfp4
exec python3 "$(dirname "$0")/test_cli.py" "${1:-build/nvfp4}"
