#!/usr/bin/env bash
# Installs what groupd needs on Debian 12 and is not there yet: the C libraries it links,
# the protobuf compilers (for `make protos` and the freshness test), h2load for `make bench`,
# PostgreSQL (`make test-postgres` runs the tests on a throw-away cluster of it),
# and the Python packages the interop tests use. Safe to run again: it installs only what is missing.
#   scripts/install-deps.sh          what building and testing need
#   scripts/install-deps.sh --bench  also C++ gRPC and g++ for the benchmarks' load generator and peer
set -euo pipefail

apt_packages=(
  libnghttp2-dev        # HTTP/2 (the transport)
  libprotobuf-c-dev     # protobuf-c runtime (the codec)
  libsqlite3-dev        # SQLite (the embedded store)
  postgresql            # PostgreSQL server and client: the other store, for make test-postgres
  protobuf-c-compiler   # protoc-c, for make protos and the generated-code freshness test
  protobuf-compiler     # protoc, descriptors for the Swift generator
  libprotobuf-dev       # the well-known .proto files
  nghttp2-client        # h2load and nghttp, for make bench
  openssl               # the openssl command line: the TLS tests make their certificates with it
  pkg-config            # SwiftPM finds the C libraries through it
  libcurl4-openssl-dev  # HTTP client of the webhook plugin (Plugins/WebhookPolicy)
  libssl-dev            # HMAC-SHA256 (libcrypto) for the webhook plugin's signatures
  libjansson-dev        # JSON for the webhook plugin's config, requests and answers
  zlib1g-dev            # zlib: gzip and deflate gRPC compression
  systemd               # systemd-analyze, which verifies deploy/groupd.service in the tests
  valgrind              # callgrind: instructions per call (make test-instructions, bench-instructions)
  binutils              # objcopy: a copy of groupd without DWARF 5, which valgrind 3.19 cannot read
  chromium              # headless Chromium: the operator console's tests (tests/test_console.py)
  chromium-driver       # chromedriver, which selenium drives it through
)
if [ "${1:-}" = "--bench" ]; then
  apt_packages+=(
    libgrpc++-dev       # C++ gRPC: the load generator and peer server of Benchmarks/LoadGen
    g++                 # to build them
  )
fi
# pytest-xdist: make test spreads the PostgreSQL interop pass over two pytest workers.
# connectrpc and protoc-gen-connectrpc: a Connect client no one here wrote (tests/test_connect_client.py).
# selenium drives Chromium in the console's tests (tests/test_console.py).
# opentelemetry-proto: the OTLP trace service the test collector serves (tests/test_tracing.py).
pip_packages=(grpcio grpcio-tools grpcio-reflection protobuf h2 pytest pytest-xdist connectrpc protoc-gen-connectrpc selenium opentelemetry-proto)

missing=()
for package in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

missing_pip=()
for package in "${pip_packages[@]}"; do
  python3 -m pip show -q "$package" >/dev/null 2>&1 || missing_pip+=("$package")
done
if [ ${#missing_pip[@]} -gt 0 ]; then
  echo "installing python packages: ${missing_pip[*]}"
  # A Debian system Python refuses installs outside a venv (PEP 668); the packages are test
  # tools, so install them anyway there.
  python3 -m pip install -q --disable-pip-version-check "${missing_pip[@]}" \
    || python3 -m pip install -q --disable-pip-version-check --break-system-packages "${missing_pip[@]}"
fi
