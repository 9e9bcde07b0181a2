#!/bin/sh
# Checks C and C++ formatting against the checked-in .clang-format, on what
# a change touches only: the tree predates .clang-format and is not
# reformatted wholesale, so whole-file checks would report lines nobody
# changed.
#
#   scripts/check-format.sh                 lines changed since the merge-base with main
#   scripts/check-format.sh --base REF      lines changed since REF (committed or not)
#   scripts/check-format.sh PATH...         the whole of each file named
#
# Prints the diff clang-format wants and exits 1 if any; 0 when clean.
# Fix with `git clang-format REF` (changed lines) or `clang-format -i PATH`.
set -eu
cd "$(dirname "$0")/.."

if ! command -v clang-format >/dev/null 2>&1; then
  echo "check-format: clang-format is not installed; apt-get install clang-format" >&2
  exit 2
fi

base=""
if [ "${1:-}" = "--base" ]; then
  [ $# -ge 2 ] || { echo "check-format: --base needs a git revision, e.g. --base main" >&2; exit 2; }
  base=$2
  shift 2
fi

if [ $# -gt 0 ]; then
  status=0
  for path in "$@"; do
    case "$path" in
      *.c | *.cc | *.cpp | *.h | *.hpp) ;;
      *) continue ;;
    esac
    if ! clang-format --dry-run -Werror "$path" 2>/dev/null; then
      clang-format "$path" | diff -u "$path" - || true
      status=1
    fi
  done
  exit $status
fi

if ! command -v git-clang-format >/dev/null 2>&1; then
  echo "check-format: git-clang-format is not installed (Debian's clang-format package has it)" >&2
  exit 2
fi
[ -n "$base" ] || base=$(git merge-base HEAD main)
out=$(git clang-format --diff --extensions c,cc,cpp,h,hpp "$base" 2>&1) || true
case "$out" in
  "" | *"no modified files to format"* | *"did not modify any files"*)
    echo "check-format: lines changed since $(git rev-parse --short "$base") are formatted"
    exit 0 ;;
esac
printf '%s\n' "$out"
echo "check-format: the lines above differ from .clang-format; run: git clang-format $base" >&2
exit 1
