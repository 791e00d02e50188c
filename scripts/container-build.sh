#!/usr/bin/env bash
# Builds deploy/Containerfile into the image grove-serve with podman, offline from any
# registry: the Debian 12 base comes from the Debian mirror apt uses, made by mmdebstrap and
# imported as localhost/debian:12 (once). PODMAN_FLAGS adds podman options (this project's
# sandbox needs "--runtime runc --cgroup-manager cgroupfs"; docs/deploy.md).
#   container-build.sh [TAG]   (default: grove-serve)
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${1:-grove-serve}
read -r -a flags <<< "${PODMAN_FLAGS:-}"
if ! podman "${flags[@]}" image exists localhost/debian:12; then
  base=$(mktemp --suffix=.tar)
  trap 'rm -f "$base"' EXIT
  mmdebstrap --variant=minbase --mode=root bookworm "$base"
  podman "${flags[@]}" import "$base" localhost/debian:12
fi
podman "${flags[@]}" build --network host --build-arg BASE=localhost/debian:12 -f deploy/Containerfile -t "$tag" .
echo "container-build: image $tag"
