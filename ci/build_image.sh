#!/usr/bin/env bash
# Build the pylog broker image (pylog:<version>, pylog:latest) and the ZooKeeper image (pylog-zookeeper:latest)
# from this checkout.
#
# The Dockerfile's default base is python:3.12-slim. When that cannot be found locally or pulled (a machine
# without a registry), a base is built here from Debian's packages: debootstrap of this machine's Debian
# release with python3, iproute2 and iptables, imported with `docker import` as pylog-base:<release>-<hash>,
# where the hash covers its recipe, so it is built once per machine. pylog and its dependencies are installed
# from a wheelhouse built on the host (.docker-wheels/, as the host's pip reaches the registry), never from
# inside a build. Set PYLOG_BASE_IMAGE to force a base. Prints what it did; exits non-zero naming the problem.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "ci/build_image.sh: $*" >&2; }
die() { say "$*"; exit 1; }

command -v docker >/dev/null 2>&1 || die "no docker command (ci/setup.sh installs docker.io)"
docker info >/dev/null 2>&1 || die "no Docker engine answers (ci/setup.sh starts dockerd)"
PYTHON="${PYTHON:-$(command -v python3)}"
VERSION="$("$PYTHON" -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')"
started=$(date +%s)

# --- the base image -----------------------------------------------------------------------------------------
RELEASE="$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")"
PACKAGES="python3,python3-venv,iproute2,iptables,ca-certificates,procps"
RECIPE="debootstrap --variant=minbase --include=$PACKAGES $RELEASE http://deb.debian.org/debian; strip docs"
LOCAL_BASE="pylog-base:$RELEASE-$(printf '%s' "$RECIPE" | sha256sum | cut -c1-12)"

base="${PYLOG_BASE_IMAGE:-}"
if [ -z "$base" ]; then
  if docker image inspect python:3.12-slim >/dev/null 2>&1 \
     || timeout 20 docker pull -q python:3.12-slim >/dev/null 2>&1; then
    base=python:3.12-slim
  else
    base="$LOCAL_BASE"
  fi
fi
if [ "$base" = "$LOCAL_BASE" ] && ! docker image inspect "$LOCAL_BASE" >/dev/null 2>&1; then
  command -v debootstrap >/dev/null 2>&1 || die "python:3.12-slim cannot be pulled and debootstrap is missing (apt-get install debootstrap)"
  say "python:3.12-slim cannot be pulled: building $LOCAL_BASE with debootstrap ($RELEASE)"
  rootfs="$(mktemp -d /var/tmp/pylog-rootfs.XXXXXX)"
  trap 'rm -rf "$rootfs"' EXIT
  debootstrap --variant=minbase --include="$PACKAGES" "$RELEASE" "$rootfs" http://deb.debian.org/debian \
    > "$rootfs.log" 2>&1 || { tail -20 "$rootfs.log" >&2; die "debootstrap failed (log above)"; }
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/doc \
         "$rootfs"/usr/share/man "$rootfs"/usr/share/locale "$rootfs.log"
  tar -C "$rootfs" -c . | docker import \
    -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' -c 'ENV LANG=C.UTF-8' \
    -c 'CMD ["/bin/bash"]' - "$LOCAL_BASE" >/dev/null
  rm -rf "$rootfs"
  trap - EXIT
  say "built $LOCAL_BASE in $(( $(date +%s) - started )) s"
fi

# --- the wheelhouse: pylog and its broker dependencies, built where pip reaches the registry --------------
build_args=(--build-arg "BASE_IMAGE=$base")
if [ "$base" = "$LOCAL_BASE" ]; then
  # the local base has the host's Debian and Python minor version: the host's wheels fit it
  rm -rf .docker-wheels
  "$PYTHON" -m pip wheel -q --disable-pip-version-check --wheel-dir .docker-wheels . \
    || die "pip wheel of pylog and its dependencies failed"
  build_args+=(--build-arg PYLOG_WHEELS=.docker-wheels)
fi

# --- the images ---------------------------------------------------------------------------------------------
docker build -q "${build_args[@]}" -t "pylog:$VERSION" -t pylog:latest -f Dockerfile . >/dev/null \
  || die "docker build of pylog:$VERSION failed (run it without -q to see why)"
zk_base="$base"
[ "$base" = python:3.12-slim ] && zk_base=debian:bookworm-slim
docker build -q --build-arg "BASE_IMAGE=$zk_base" -t pylog-zookeeper:latest -f docker/zookeeper.Dockerfile docker \
  >/dev/null || die "docker build of pylog-zookeeper failed (run it without -q to see why)"
rm -rf .docker-wheels
size="$(docker image inspect -f '{{.Size}}' pylog:latest)"
say "pylog:$VERSION, pylog:latest ($(( size / 1000000 )) MB) and pylog-zookeeper:latest from $base in $(( $(date +%s) - started )) s"
