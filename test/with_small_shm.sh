#!/usr/bin/env bash
# Runs COMMAND with a /dev/shm of SIZE of its own (a tmpfs in a mount namespace of its own),
# as a container's (Docker's default is 64 MiB): what UCX's shared memory cannot fit in.
# Needs root (unshare --mount); exits 77 where it cannot make one.
# Usage: with_small_shm.sh SIZE COMMAND [ARGS...]
size=$1
shift
unshare --mount --propagation private true 2>/dev/null || exit 77
exec unshare --mount --propagation private bash -c 'mount -t tmpfs -o size="$0" tmpfs /dev/shm || exit 77; exec "$@"' \
  "$size" "$@"
