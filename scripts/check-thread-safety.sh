#!/usr/bin/env bash
# Runs Clang's thread-safety analysis over the sources whose lock contracts
# are annotations (port/thread_annotations.h, port/mutex.h): every .cc file
# under src/ that includes port/mutex.h, directly or through a header that
# does, with the flags its build uses (compile_commands.json). GCC builds the
# project and cannot check the annotations, so this does; ctest runs it as
# thread_safety_analysis.
#
#   scripts/check-thread-safety.sh [BUILD_DIR]    default: build
#
# Needs a configured and built BUILD_DIR (generated headers) and clang++
# (Debian's `clang`; $CLANGXX names another). Prints Clang's diagnostics and
# exits 1 if the analysis finds anything; 0 when clean; 2 when it cannot run.
# src/interposer/ is left out: its few process-local mutexes are not
# annotated.
set -euo pipefail
cd "$(dirname "$0")/.."

build=${1:-build}
clangxx=${CLANGXX:-clang++}
if ! command -v "$clangxx" >/dev/null 2>&1; then
  echo "check-thread-safety: $clangxx is not installed; apt-get install clang (scripts/install-deps.sh)" >&2
  exit 2
fi
db=$build/compile_commands.json
if [ ! -f "$db" ]; then
  echo "check-thread-safety: no $db; configure first (cmake --preset default)" >&2
  exit 2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# One response file per source: its -D, -I and -std flags from the database,
# then the source. Sources are chosen by following quoted #includes under
# src/ from port/mutex.h outwards.
python3 - "$db" "$work" <<'EOF'
import json, os, re, shlex, sys

db_path, out = sys.argv[1], sys.argv[2]
src = os.path.abspath("src")
include = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)

includes = {}  # path relative to src/ -> the quoted includes it names
for root, dirs, files in os.walk(src):
    dirs[:] = [d for d in dirs if os.path.relpath(os.path.join(root, d), src) != "interposer"]
    for f in files:
        if f.endswith((".h", ".cc")):
            path = os.path.join(root, f)
            with open(path, encoding="utf-8", errors="replace") as fh:
                includes[os.path.relpath(path, src)] = set(include.findall(fh.read()))

annotated = {"port/mutex.h"}
grew = True
while grew:
    grew = False
    for path, named in includes.items():
        if path not in annotated and named & annotated:
            annotated.add(path)
            grew = True
wanted = {os.path.join(src, p) for p in annotated if p.endswith(".cc")}

seen = set()
with open(db_path) as fh:
    entries = json.load(fh)
for entry in entries:
    path = os.path.normpath(os.path.join(entry["directory"], entry["file"]))
    if path not in wanted or path in seen:
        continue
    seen.add(path)
    args = iter((entry.get("arguments") or shlex.split(entry["command"]))[1:])
    flags = []
    for a in args:
        if a in ("-D", "-I", "-isystem"):
            flags += [a, next(args)]
        elif a.startswith(("-D", "-I", "-isystem", "-std=")):
            flags.append(a)
    with open(os.path.join(out, f"{len(seen):04d}.rsp"), "w") as rsp:
        rsp.write(" ".join(shlex.quote(x) for x in flags + [path]) + "\n")
missing = sorted(wanted - seen)
if missing:
    print("check-thread-safety: not in the compile database (not built?): " + " ".join(missing), file=sys.stderr)
    sys.exit(2)
EOF

count=$(find "$work" -name '*.rsp' | wc -l)
start=$(date +%s)
status=0
# shellcheck disable=SC2016  # $0 and $1 are the inner sh's
find "$work" -name '*.rsp' -print0 | sort -z |
  xargs -0 -P "$(nproc)" -I{} sh -c '"$0" -fsyntax-only -Wthread-safety -Werror=thread-safety @"$1" 2>"$1.log"' \
    "$clangxx" {} || status=1
# Each file's diagnostics together, not interleaved with another's.
for log in "$work"/*.log; do
  if [ -s "$log" ]; then cat "$log" >&2; fi
done
if [ "$status" -ne 0 ]; then
  echo "check-thread-safety: the analysis failed (above); fix the locking, or the annotation if it is wrong" >&2
  exit 1
fi
echo "check-thread-safety: $count files clean in $(($(date +%s) - start)) s"
