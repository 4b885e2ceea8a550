#!/usr/bin/env bash
# Binaries built here, run on a GPU machine without rebuilding there: packs build/dev's executables and
# CTest files into .device-bin/full.tar.xz (stripped, xz; about 23 MB) for the device tool's `carry`.
#   scripts/carry-binaries.sh pack       on the development machine, after cmake --build --preset dev
#   source scripts/carry-binaries.sh unpack    on the GPU machine (carry [".device-bin"]): build/dev back,
#                                              with build/gpu-check pointing at it and /work/main at the
#                                              checkout (the CTest files name the absolute paths of here)
# .device-bin/ is git-ignored. No shell options are set: unpack is sourced.
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
case "${1:-}" in
  pack)
    stage=$(mktemp -d)
    (cd "$repo/build/dev" &&
      find . \( -path ./CMakeFiles -o -path ./_deps \) -prune -o -type f \
        \( -perm -u+x -o -name CTestTestfile.cmake -o -name '*.csv' \) ! -name '*.so' ! -name '*.a' -print |
        grep -v CMakeFiles | while read -r f; do mkdir -p "$stage/$(dirname "$f")" && cp "$f" "$stage/$f"; done)
    find "$stage" -type f -perm -u+x -exec strip {} \; 2>/dev/null
    mkdir -p "$repo/.device-bin"
    (cd "$stage" && tar cf - . | xz -T2 -9 >"$repo/.device-bin/full.tar.xz")
    rm -rf "$stage"
    ls -la "$repo/.device-bin/full.tar.xz"
    ;;
  unpack)
    cd "$repo" || return 1
    rm -rf build/dev && mkdir -p build/dev && tar xJf .device-bin/full.tar.xz -C build/dev || return 3
    [ -e /work/main ] || { mkdir -p /work && ln -s "$repo" /work/main; }
    [ -x /usr/bin/cmake ] || ln -s "$(command -v cmake)" /usr/bin/cmake
    ln -sfn dev build/gpu-check
    ;;
  *) echo "usage: scripts/carry-binaries.sh pack | source scripts/carry-binaries.sh unpack" >&2; exit 2 ;;
esac
