#!/bin/bash
# Usage: callgrind.sh KEYS — runs fifocost with -keys KEYS against a fresh
# redis-server under valgrind's callgrind, and prints the instructions the
# server ran in all and in the library's functions. Run from anywhere in the
# repository.
set -euo pipefail
keys=${1:?usage: callgrind.sh KEYS}
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
(cd "$here" && go build -o "$dir/fifocost" .)
port=$((20000 + RANDOM % 10000))
valgrind --tool=callgrind --callgrind-out-file="$dir/out" redis-server --port "$port" --save '' --appendonly no --dir "$dir" --daemonize no >"$dir/log" 2>&1 &
pid=$!
for _ in $(seq 300); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
"$dir/fifocost" -addr "127.0.0.1:$port" -keys "$keys"
redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
wait "$pid" || true
callgrind_annotate --inclusive=yes "$dir/out" 2>/dev/null |
  awk -v keys="$keys" '/PROGRAM TOTALS/ {gsub(",", "", $1); total=$1}
    /:fcallCommandGeneric / {gsub(",", "", $1); functions=$1}
    END {printf "keys=%s instructions=%s functions=%s\n", keys, total, functions}'
