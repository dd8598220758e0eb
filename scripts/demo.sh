#!/usr/bin/env bash
# Installs dependencies, builds corral, starts a local cluster of 16 virtual nodes and
# runs a few jobs on it, printing what happens. This is the README's demo command.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
# Only the programs the demo runs: the test suites take most of a full build.
cmake --build "$BUILD_DIR" -j"$(nproc)" --target corral corrald corral-node corral-imp corral-infiniband \
    corral-ufm-emu
export PATH="$PWD/$BUILD_DIR/bin:$PATH"

# Infiniband: every node gets a two-fabric node's sysfs tree (node3's IbFabric2 port down),
# and partition keys go through the UFM emulator.
ib=$(mktemp -d)
python3 tests/integration/ib_sysfs_tree.py "$ib/sysfs" 16 --down 3 > "$ib/corral.toml"
echo "demo:demo" > "$ib/ufm.cred" && chmod 600 "$ib/ufm.cred"
corral-ufm-emu --credentials "$ib/ufm.cred" --sysfs "$ib/sysfs" --port-file "$ib/ufm.port" > "$ib/ufm.log" 2>&1 &
ufm=$!
trap 'kill $ufm 2>/dev/null; rm -rf "$ib"' EXIT
for _ in $(seq 50); do [ -s "$ib/ufm.port" ] && break; sleep 0.1; done
export CORRAL_DEMO_UFM="http://127.0.0.1:$(cat "$ib/ufm.port")"
sed -i "s|^\[infiniband\]$|[infiniband]\nsubnet-manager = \"ufm\"\nufm-url = \"$CORRAL_DEMO_UFM\"\nufm-credentials = \"$ib/ufm.cred\"|" \
    "$ib/corral.toml"
corral start --test-size=16 --cores-per-node=8 --ib-sysfs "$ib/sysfs" --config "$ib/corral.toml" \
    -- "$PWD/scripts/demo-jobs.sh"
