#!/bin/bash
# Collect every shared library (but glibc's and the C++ runtime's) that the given
# executables and DPDK plugins need, as real files named by their soname.
set -e
dst=$1; shift
for exe in "$@"; do
  ldd "$exe" | awk '/=>/ {print $1, $3}' | while read so path; do
    case "$so" in libc.so*|libm.so*|libpthread*|libdl.so*|librt.so*|ld-linux*|libstdc++*|libgcc_s*) continue;; esac
    [ -e "$dst/$so" ] || cp -L "$path" "$dst/$so"
  done
done
