#!/usr/bin/env bash
# Runs every check and test of every Go module in the repository with the
# race detector, then each fuzz target for a short time. Extra arguments go
# to `go test`, e.g. ./test.sh -short.
#
# WORKQUEUE_SOAK=1 (.ci/run sets it) runs the root package's long tests at
# the sizes CI runs, some minutes longer than the default ones: 3,000,000
# model-walk operations instead of 300,000, 1500 linearizability histories
# per configuration instead of 300, 60 priority and group walks instead of
# 20, 100 racy and drain rounds instead of 50 and 20. -short makes them
# smaller still. A longer soak of one test, in the repository's root:
#   go test -race -run '^TestModelRandomWalks$' -modelops 10000000 .
#
# FUZZTIME sets how long each fuzz target runs (default 10s); to fuzz
# longer: FUZZTIME=30m ./test.sh, or in the module of the target:
#   go test -run '^$' -fuzz '^FuzzModel$' -fuzztime 30m .
#
# What the tests need from Debian (chromium for the inspector's browser
# test, redis-server and redis-tools for the Redis queue's) is installed
# first when missing, as root or with sudo; otherwise the script stops at
# once with the command to run.
#
# The kubernetes module's tests run controllers against a real
# kube-apiserver and etcd that kubernetes/tools/build.sh builds from source
# into a cache outside the repository (15 to 25 minutes on 2 cores the
# first time, seconds after). KUBE=1 builds them when missing and runs
# the tests (CI does), KUBE=0 skips them, and by default they run only when
# the binaries are already built, or KUBEBUILDER_ASSETS names others.
set -euo pipefail
cd "$(dirname "$0")"

missing=()
command -v chromium >/dev/null || missing+=(chromium)
command -v redis-server >/dev/null || missing+=(redis-server)
command -v redis-cli >/dev/null || missing+=(redis-tools)
if [ ${#missing[@]} -gt 0 ]; then
  install="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y ${missing[*]}"
  if ! command -v apt-get >/dev/null; then
    echo "the tests need Debian's packages ${missing[*]} (or the same programs from elsewhere)" >&2
    exit 1
  elif [ "$(id -u)" = 0 ]; then
    echo "== installing ${missing[*]}"
    sh -c "$install"
  elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    echo "== installing ${missing[*]} with sudo"
    sudo sh -c "$install"
  else
    echo "the tests need ${missing[*]}; install them with:" >&2
    echo "  sudo sh -c '$install'" >&2
    exit 1
  fi
fi

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" $unformatted >&2
  exit 1
fi

# Every go.mod resolves for its users once the next release is tagged (its
# siblings required at existing tags or at VERSION, none replaced), and is
# tidy as they see it. The check reads the tags from git.
if git rev-parse --git-dir >/dev/null 2>&1; then
  .ci/check-requires
  .ci/tidy -diff
else
  echo "== not a git checkout: .ci/check-requires and .ci/tidy skipped"
fi

# One Go version for the whole repository: the go line of every go.mod and
# go.work, and the README's "With Go X.Y or later", must agree, so that the
# README's commands work with the version it names.
readme_go=$(sed -nE 's/^With Go ([0-9]+\.[0-9]+) or later.*/\1/p' README.md)
if [ -z "$readme_go" ]; then
  echo "README.md names no Go version in a line starting \"With Go X.Y or later\"" >&2
  exit 1
fi
for f in $(git ls-files 'go.mod' '*/go.mod' 'go.work' 2>/dev/null || find . -name go.mod -o -name go.work); do
  line=$(sed -nE 's/^go ([0-9.]+)$/\1/p' "$f")
  if [ "$line" != "$readme_go.0" ]; then
    echo "$f says go $line, the README says Go $readme_go: make them agree" >&2
    exit 1
  fi
done

# Verbose output, without the lines every passing test prints, so that the
# figures the tests log (operations checked, rounds, divergences) show.
quiet() { grep -vE '^\s*(=== (RUN|PAUSE|CONT|NAME)|--- (PASS|SKIP)|PASS$)' || true; }

# Every module in the workspace of go.work, which joins them as they are in
# this checkout: a module requires its siblings at the version the next
# release tags (VERSION), which no proxy serves before the release, so
# GOWORK=off cannot build them. Each go.mod on its own, as its users get
# it, is checked above.
export GOWORK=$PWD/go.work
case "${KUBE:-}" in
1) KUBEBUILDER_ASSETS=$(kubernetes/tools/build.sh) ;;
0) KUBEBUILDER_ASSETS= ;;
*) KUBEBUILDER_ASSETS=${KUBEBUILDER_ASSETS:-$(kubernetes/tools/build.sh -cached || true)} ;;
esac
export KUBEBUILDER_ASSETS
if [ -z "$KUBEBUILDER_ASSETS" ]; then
  echo "== ./kubernetes: no kube-apiserver built, its tests will skip; KUBE=1 ./test.sh builds one (15 to 25 min the first time)"
fi
# kubernetes/tools only builds those binaries: it has no code of its own.
for mod in $(find . -name go.mod -not -path './.git/*' -not -path './kubernetes/tools/*' | sort); do
  dir=$(dirname "$mod")
  echo "== $dir"
  (cd "$dir" && go vet ./... && go test -race -count=1 -timeout 20m -v "$@" ./... | quiet)
done

for target in $(grep -rl --include='*_test.go' '^func Fuzz' . | sort); do
  dir=$(dirname "$target")
  for fuzz in $(grep -o '^func Fuzz[A-Za-z0-9_]*' "$target" | cut -d' ' -f2); do
    echo "== fuzz $fuzz in $dir for ${FUZZTIME:-10s}"
    # Minimizing a new interesting input may take 60 s by default, and the
    # fuzzer runs nothing new meanwhile: FuzzPriorityQueueModel sat at 0
    # execs/s for 35 s of a 40 s run, and 10 s runs on a loaded machine
    # failed with "context deadline exceeded". With 1 s it runs throughout.
    if ! out=$(cd "$dir" && go test -run '^$' -fuzz "^$fuzz\$" -fuzztime "${FUZZTIME:-10s}" -fuzzminimizetime 1s . 2>&1); then
      echo "$out"
      exit 1
    fi
    echo "$out" | grep -E '^fuzz: elapsed' | tail -1
  done
done

# The library on a 32-bit platform, where sync/atomic needs 64-bit fields
# aligned to 8 bytes; without the race detector, which 386 lacks. Only where
# the host can run 386 binaries: a kernel without 32-bit support (and macOS)
# cannot, so a tiny program built for 386 is tried first.
probe_dir=$(mktemp -d)
trap 'rm -rf "$probe_dir"' EXIT
printf 'package main\n\nfunc main() {}\n' > "$probe_dir/main.go"
if (cd "$probe_dir" && GOOS=linux GOARCH=386 GOFLAGS= GO111MODULE=off go build -o probe main.go 2>/dev/null) &&
  [ "$(uname -s)" = Linux ] && "$probe_dir/probe" 2>/dev/null; then
  echo "== . on GOARCH=386"
  (GOARCH=386 go test -count=1 -short .)
else
  echo "== . on GOARCH=386: vetted and built only, this host cannot run 32-bit x86 binaries"
  GOARCH=386 go vet . && GOARCH=386 go test -c -o "$probe_dir/386.test" .
fi
