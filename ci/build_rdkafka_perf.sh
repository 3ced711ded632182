#!/usr/bin/env bash
# Build librdkafka's examples/rdkafka_performance from Debian's librdkafka source package (deb-src of the
# configured Debian suites) with Debian's librdkafka-dev headers, and print the binary's path.
#
#   ci/build_rdkafka_perf.sh            # -> .bench-tools/rdkafka_performance (built once, then reused)
#
# Called by ci/bench.sh when `pylog bench --workload rdkafka` may run; never by ci/setup.sh or ci/test.sh: the
# test suite does not depend on it. Needs root (or sudo) for apt; idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${PYLOG_BENCH_TOOLS:-$PWD/.bench-tools}"
BIN="$OUT/rdkafka_performance"
if [ -x "$BIN" ]; then echo "$BIN"; exit 0; fi
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
# deb-src for the same suites and mirror as the configured deb entries (Debian's deb822 sources).
if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ && ! grep -qs '^deb-src' /etc/apt/sources.list; then
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources \
      | $SUDO tee /etc/apt/sources.list.d/pylog-deb-src.sources >/dev/null
  else
    sed -n 's/^deb /deb-src /p' /etc/apt/sources.list | $SUDO tee /etc/apt/sources.list.d/pylog-deb-src.list >/dev/null
  fi
  $SUDO apt-get update -qq >/dev/null
fi
need=()
dpkg -s librdkafka-dev >/dev/null 2>&1 || need+=(librdkafka-dev)
command -v dpkg-source >/dev/null 2>&1 || need+=(dpkg-dev)
command -v cc >/dev/null 2>&1 || need+=(gcc)
if [ ${#need[@]} -gt 0 ]; then
  echo "ci/build_rdkafka_perf.sh: installing Debian packages: ${need[*]}" >&2
  $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
mkdir -p "$OUT/src"
src="$(ls -d "$OUT"/src/librdkafka-*/ 2>/dev/null | head -n 1 || true)"
if [ -z "$src" ]; then
  echo "ci/build_rdkafka_perf.sh: fetching Debian's librdkafka source package" >&2
  (cd "$OUT/src" && apt-get source -qq librdkafka >/dev/null)
  src="$(ls -d "$OUT"/src/librdkafka-*/ | head -n 1)"
fi
# rdkafka_performance.c uses the public API plus librdkafka's portability headers (src/rd.h), which want the
# config.h of librdkafka's own configure (mklove; it only probes the system, it installs nothing).
if [ ! -f "$src/config.h" ]; then
  echo "ci/build_rdkafka_perf.sh: configuring the librdkafka source tree (for config.h)" >&2
  (cd "$src" && ./configure >/dev/null)
fi
# Linked against the librdkafka that confluent-kafka's wheel ships (2.x, the one the confluent-kafka workload
# drives) when there is one: Debian's 2.0.2 cannot read Tansu 0.6's ApiVersions v3 answer ("Read underflow"),
# so it could not measure Tansu. librdkafka keeps its ABI, so the 2.0.2 example runs on the newer library.
PYTHON="${PYTHON:-$(command -v python3 || command -v python)}"
bundled="$(cd / && "$PYTHON" -c 'import confluent_kafka, glob, os
d = os.path.join(os.path.dirname(os.path.dirname(confluent_kafka.__file__)), "confluent_kafka.libs")
print(next(iter(sorted(glob.glob(os.path.join(d, "librdkafka*.so*")))), ""))' 2>/dev/null || true)"
if [ -n "$bundled" ]; then
  libs=(-L"$(dirname "$bundled")" -l:"$(basename "$bundled")" -Wl,-rpath,"$(dirname "$bundled")")
else
  read -r -a libs <<< "$(pkg-config --libs rdkafka)"
fi
cc -O2 -o "$BIN.tmp" -I"$src/src" $(pkg-config --cflags rdkafka) "$src/examples/rdkafka_performance.c" "${libs[@]}" -lm
mv "$BIN.tmp" "$BIN"
echo "$BIN"
