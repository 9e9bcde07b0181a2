#!/usr/bin/env bash
# Checks one Promela model with spin, exhaustively, in a scratch directory:
#   verification/check.sh MODEL.pml pass|fail [-DNAME ...]
# `pass`: spin must find no error; `fail` (a seeded mutation): it must find
# one. Prints spin's error and state counts on one line.
set -euo pipefail
model=$(realpath "$1") expect=$2
shift 2
spin_bin=${SPIN:-spin}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
"$spin_bin" "$@" -a "$model" >/dev/null
# PAN_CFLAGS: more flags for the verifier (e.g. -DBFS for unbounded models).
cc -w -O2 -DSAFETY ${PAN_CFLAGS:-} -o pan pan.c
out=$(./pan -m100000 2>&1) || true
if grep -q "max search depth too small" <<<"$out"; then
  echo "$(basename "$model") $* : the search hit its depth limit, so it is incomplete (raise -m, or use PAN_CFLAGS=-DBFS)"
  exit 2
fi
errors=$(grep -oE 'errors: [0-9]+' <<<"$out" | grep -oE '[0-9]+' || echo "?")
states=$(grep -oE '[0-9.e+]+ states, stored' <<<"$out" | head -1)
why=$(grep -oE 'assertion violated.*|invalid end state.*' <<<"$out" | head -1 || true)
echo "$(basename "$model") $* : errors $errors, $states${why:+, $why}"
if [ "$errors" = "?" ]; then echo "$out" | tail -20; exit 2; fi
if [ "$expect" = pass ] && [ "$errors" -ne 0 ]; then exit 1; fi
if [ "$expect" = fail ] && [ "$errors" -eq 0 ]; then echo "the seeded bug was not caught"; exit 1; fi
exit 0
