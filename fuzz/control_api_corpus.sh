#!/usr/bin/env bash
# Regenerates the seed corpus of fuzz/control_api_fuzz.cc: one file per
# case, a selector byte (the RPC) and the request encoded by protoc from
# text. Run from anywhere; needs protoc (protobuf-compiler).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)/corpus/control_api_fuzz"
proto_root="$here/../../../proto"
msg() {  # FILE SELECTOR MESSAGE TEXT
  { printf "\\x$(printf %02x "$2")"; printf '%s' "$4" |
      protoc --proto_path="$proto_root" --encode="gpuslice.control.v1.$3" gpuslice/control.proto; } >"$here/$1"
}
msg devices 0 GetDevicesRequest ''
msg create_plain 1 CreateVgpuRequest 'name: "a" memory_limit_bytes: 67108864'
msg create_all 1 CreateVgpuRequest 'name: "train.x-1" gpus: "0" gpus: "1" memory_limit_bytes: 1073741824 compute_share_pct: 50 compute_cap_pct: 80 priority: PRIORITY_LATENCY_CRITICAL persistent: true client_pid: 1'
msg create_uuid 1 CreateVgpuRequest 'name: "u" gpus: "GPU-fa000000-0000-0000-0000-000000000001"'
msg create_bad_name 1 CreateVgpuRequest 'name: "../../etc"'
msg create_empty_name 1 CreateVgpuRequest 'name: ""'
msg create_bad_gpu 1 CreateVgpuRequest 'name: "g" gpus: "7" gpus: "0"'
msg create_dup_gpu 1 CreateVgpuRequest 'name: "g" gpus: "0" gpus: "0"'
msg create_zero_memory 1 CreateVgpuRequest 'name: "z" memory_limit_bytes: 0'
msg create_bad_pct 1 CreateVgpuRequest 'name: "p" compute_share_pct: 4000000000 compute_cap_pct: 0'
msg create_bad_priority 1 CreateVgpuRequest 'name: "p" priority: 7'
msg list_all 2 ListVgpusRequest ''
msg list_missing 2 ListVgpusRequest 'name: "nope"'
msg resize_missing 3 ResizeVgpuRequest 'name: "nope" memory_limit_bytes: 1'
msg resize_nothing 3 ResizeVgpuRequest 'name: "a"'
msg resize_contradiction 3 ResizeVgpuRequest 'name: "a" memory_limit_bytes: 5 memory_unlimited: true'
msg delete_missing 4 DeleteVgpuRequest 'name: "nope"'
msg delete_if_unused 4 DeleteVgpuRequest 'name: "a" if_unused: true client_pid: 4294967295'
msg sequence_shrink 5 CreateVgpuRequest 'name: "s" memory_limit_bytes: 1048576 compute_share_pct: 30'
msg sequence_persistent 5 CreateVgpuRequest 'name: "q" persistent: true join_existing: true priority: PRIORITY_BEST_EFFORT'
msg sequence_all_gpus 5 CreateVgpuRequest 'name: "m" gpus: "1" gpus: "0" compute_cap_pct: 100'
printf '\x01\xff\xff\xff' >"$here/truncated"
printf '\x03\x0a\x05ab' >"$here/short_name"
