# rootfs.sh — assembling a container's root file system from this machine's
# files, for images built FROM scratch (no base image, no registry).
# Sourced by deploy/k8s/build-image.sh and tests/k8s/image_test.sh.

# rootfs_add_elf ROOT SRC DEST: copies the ELF file SRC to ROOT/DEST, and
# every shared library it needs (ldd's closure, the loader included) to the
# same path under ROOT, so the file runs there as it does here. Fails when
# a library is not found. Files we built are stripped; the system's are
# copied as they are.
rootfs_add_elf() {
  local root=$1 src=$2 dest=$3
  install -D -m 0755 "$src" "$root$dest"
  strip --strip-unneeded "$root$dest"
  local deps
  deps=$(ldd "$src") || { echo "rootfs: ldd $src failed" >&2; return 1; }
  if grep -q 'not found' <<<"$deps"; then
    echo "rootfs: $src needs libraries this machine lacks:" >&2
    grep 'not found' <<<"$deps" >&2
    return 1
  fi
  local lib
  # "libx.so => /path (addr)" and the loader's "/lib64/ld-linux... (addr)".
  for lib in $(awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' <<<"$deps"); do
    [ -e "$root$lib" ] || install -D -m 0755 "$(readlink -f "$lib")" "$root$lib"
  done
}

# rootfs_skeleton ROOT: the directories every process expects.
rootfs_skeleton() {
  local root=$1
  install -d -m 0755 "$root/etc" "$root/run" "$root/var/run"
  install -d -m 1777 "$root/tmp"
}
