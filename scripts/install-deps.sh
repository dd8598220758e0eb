#!/usr/bin/env bash
# Installs every Debian package corral needs to build, test and run its demo.
# Safe to run again; needs root (or sudo) on Debian 12.
#   --fuzz   also clang's libFuzzer runtime, for bench/fuzz (not needed to build or test)
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
PKGS=(
  build-essential cmake ninja-build ccache pkg-config lld
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libsqlite3-dev sqlite3
  nlohmann-json3-dev libyaml-cpp-dev libtomlplusplus-dev libcli11-dev
  libspdlog-dev libfmt-dev
  libhwloc-dev libssl-dev
  munge libmunge-dev
  mpich libmpich-dev libpmix-dev openmpi-bin libopenmpi-dev hpcc libpmi2-0 libgoogle-perftools-dev
  libsimdjson-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  procps util-linux iproute2 python3 python3-pytest
  clang
  libcpp-httplib-dev openssl python3-kubernetes libcurl4-openssl-dev
  pci.ids
  patchelf
)
# kubectl for the DWS emulator's tests: Debian's own when none is installed.
if ! command -v kubectl >/dev/null 2>&1; then PKGS+=(kubernetes-client); fi
if [ "${1:-}" = "--fuzz" ]; then PKGS+=(libclang-rt-14-dev); fi
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update
  $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi
