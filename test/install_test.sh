#!/usr/bin/env bash
# meson install into a staging folder, then build examples/allreduce.c against the installed
# header and library through pkg-config, as a user would, and run it on 3 ranks. The header
# must also compile as strict C99.
set -euo pipefail
build=$1 src=$2
# meson points LD_LIBRARY_PATH at the build tree; a user's program must not need it.
unset LD_LIBRARY_PATH
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
meson install -C "$build" --destdir "$stage" --no-rebuild >/dev/null
pcfile=$(find "$stage" -name ringreduce.pc | head -1)
[ -n "$pcfile" ] || { echo "ringreduce.pc not installed"; exit 1; }
# The staged copy is the installed file with its prefix moved into the staging folder.
mkdir "$stage/pc"
sed "s|^prefix=|prefix=$stage|" "$pcfile" >"$stage/pc/ringreduce.pc"
export PKG_CONFIG_PATH=$stage/pc
flags=$(pkg-config --cflags --libs ringreduce)
libdir=$(pkg-config --variable=libdir ringreduce)
echo "pkg-config: $flags"
cc -std=c99 -Wall -Wextra -Werror -pedantic "$src/examples/allreduce.c" -o "$stage/allreduce" $flags -Wl,-rpath,"$libdir"
libs=$(ldd "$stage/allreduce")  # not piped into grep -q: with pipefail, SIGPIPE fails it
grep -q "$libdir/libringreduce.so" <<<"$libs" || { echo "not linked to the installed library:"; echo "$libs"; exit 1; }
cli=$(find "$stage" -type f -name ringreduce -perm -u+x | head -1)
[ -n "$cli" ] || { echo "ringreduce CLI not installed"; exit 1; }
out=$(LD_LIBRARY_PATH=$libdir timeout 60 "$cli" run -n 3 -- "$stage/allreduce")
echo "$out"
[ "$(grep -c 'sum 6, 0 wrong' <<<"$out")" = 3 ]
