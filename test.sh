#!/usr/bin/env bash
# Runs every check and test of every Go module in the repository, with the
# race detector. Extra arguments go to `go test`, e.g. ./test.sh -count=5.
set -euo pipefail
cd "$(dirname "$0")"

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" $unformatted >&2
  exit 1
fi

for mod in $(find . -name go.mod -not -path './.git/*' | sort); do
  dir=$(dirname "$mod")
  echo "== $dir"
  (cd "$dir" && go vet ./... && go test -race -count=1 "$@" ./...)
done
