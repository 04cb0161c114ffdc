#!/bin/sh
# Install the Debian packages nvfp4 builds with (compiler, make, jansson for
# safetensors headers, clang for the fuzzer).  Does nothing if all are present.
set -e
need=""
for p in gcc make libjansson-dev clang; do
    dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"
done
# libFuzzer's runtime ships in clang's runtime package on Debian 12.
if ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
    need="$need libclang-rt-14-dev"
fi
[ -z "$need" ] && exit 0
echo "installing:$need" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq $need >/dev/null
