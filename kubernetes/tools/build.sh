#!/usr/bin/env bash
# Builds kube-apiserver and etcd from source, at the versions this module's
# go.mod requires, into a cache directory outside the repository, and prints
# that directory: the tests of ../ take it as KUBEBUILDER_ASSETS. Nothing is
# downloaded but Go modules, so it works where only the module proxy is
# reachable. A directory already built for the same versions is reused; a
# version change in go.mod makes a new one.
#
# A cold build of kube-apiserver took 20 to 23 minutes on 2 cores shared
# with other tests, module downloads included, and 2.3 GB of memory at its
# peak (the linker); etcd under a minute. With Go's build cache warm both
# take some 15 s.
#
# With -cached it builds nothing: it prints the directory if it is complete
# and fails otherwise.
#
#   KUBE_ASSETS_CACHE  where the versioned directories go
#                      (default ${XDG_CACHE_HOME:-$HOME/.cache}/go-workqueue/kube)
set -euo pipefail
cd "$(dirname "$0")"
export GOWORK=off CGO_ENABLED=0

# Read from go.mod rather than asked of go, which would load the module
# graph even when nothing is to be built.
version() { awk -v m="$1" '$1 == m && $2 ~ /^v/ { print $2; exit }' go.mod; }
kube=$(version k8s.io/kubernetes)
etcd=$(version go.etcd.io/etcd/server/v3)
if [ -z "$kube" ] || [ -z "$etcd" ]; then
  echo "$0: no k8s.io/kubernetes or etcd version in go.mod" >&2
  exit 1
fi
cache=${KUBE_ASSETS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/go-workqueue/kube}
dir="$cache/kube-apiserver-$kube-etcd-$etcd"

if [ -x "$dir/kube-apiserver" ] && [ -x "$dir/etcd" ]; then
  echo "$dir"
  exit 0
elif [ "${1:-}" = -cached ]; then
  # Only asked whether they are built: they are not.
  exit 1
fi

# Built beside the final directory and renamed into place, so that an
# interrupted build never leaves a directory that looks complete.
mkdir -p "$cache"
tmp=$(mktemp -d "$cache/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# Without these the server reports v0.0.0-master, and its compatibility
# version (derived from its own) makes it refuse the API it should serve.
minor=${kube#v1.}
minor=${minor%%.*}
pkg=k8s.io/component-base/version
ldflags="-s -w -X $pkg.gitVersion=$kube -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
ldflags="$ldflags -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"

start=$SECONDS
go build -trimpath -ldflags "$ldflags" -o "$tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver >&2
echo "built kube-apiserver $kube in $((SECONDS - start)) s" >&2
start=$SECONDS
go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3 >&2
echo "built etcd $etcd in $((SECONDS - start)) s" >&2

rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
echo "$dir"
