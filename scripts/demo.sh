#!/usr/bin/env bash
# Installs dependencies, builds corral, starts a local cluster of 16 virtual nodes and
# runs a few jobs on it, printing what happens. This is the README's demo command.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
# Only the programs the demo runs: the test suites take most of a full build.
cmake --build "$BUILD_DIR" -j"$(nproc)" --target corral corrald corral-node corral-imp
export PATH="$PWD/$BUILD_DIR/bin:$PATH"
exec corral start --test-size=16 --cores-per-node=8 -- "$PWD/scripts/demo-jobs.sh"
