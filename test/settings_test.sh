#!/usr/bin/env bash
# The settings are documented in one place, the reader's own table (engine/setup/config.cc,
# settingsTable): the README's settings table must be `ringreduce info --settings` and
# docs/testing.md's test hooks `ringreduce info --test-hooks`, byte for byte; every RR_
# variable the library reads must be in one of the two; and every other RR_ name in the tree
# (the test programs' and scripts' variables) must be in the docs. Names of the public
# header and compile-time macros are not variables.
# Usage: settings_test.sh RINGREDUCE SOURCE_DIR [--write]   (--write: rewrite both tables)
set -uo pipefail
rr=$1 src=$2 write=${3:-}
failed=0
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# table FILE START_MARK END_MARK: the lines between the two marker lines.
table() { awk -v s="$2" -v e="$3" 'index($0, e) == 1 { on = 0 } on { print } index($0, s) == 1 { on = 1 }' "$1"; }

# check FILE START END FLAG WHAT
check() {
  local file=$1 start=$2 end=$3 flag=$4 what=$5
  if ! grep -q "^$start" "$file" || ! grep -q "^$end" "$file"; then
    echo "FAILED: $file has no '$start' ... '$end' markers for $what"
    failed=$((failed + 1))
    return
  fi
  "$rr" info "$flag" >"$out/want" || { echo "FAILED: ringreduce info $flag exited $?"; failed=$((failed + 1)); return; }
  if [ "$write" = --write ]; then
    awk -v s="$start" -v e="$end" -v t="$out/want" '
      index($0, e) == 1 { on = 0 }
      !on { print }
      index($0, s) == 1 { on = 1; while ((getline line < t) > 0) print line }' "$file" >"$out/new" &&
      cat "$out/new" >"$file"
    echo "wrote $what into $file"
  fi
  table "$file" "$start" "$end" >"$out/have"
  if diff -u "$out/have" "$out/want" >"$out/diff"; then
    echo "ok: $what in $file is ringreduce info $flag ($(wc -l <"$out/want") lines)"
  else
    echo "FAILED: $what in $file differs from ringreduce info $flag (bash test/settings_test.sh RINGREDUCE . --write):"
    head -20 "$out/diff" | sed 's/^/  /'
    failed=$((failed + 1))
  fi
}
check "$src/README.md" "<!-- settings:" "<!-- end settings -->" --settings "the settings table"
check "$src/docs/testing.md" "<!-- test hooks:" "<!-- end test hooks -->" --test-hooks "the test hooks table"

# Every RR_ variable the library reads is in the reader's table.
"$rr" info --settings >"$out/tables" && "$rr" info --test-hooks >>"$out/tables"
for d in base engine kernels transport; do
  grep -rhoE '(env|getenv)\("RR_[A-Z0-9_]+"\)' "$src/$d" --include='*.cc' --include='*.h' --include='*.cu' || true
done | grep -oE 'RR_[A-Z0-9_]+' | sort -u >"$out/read"
while read -r name; do
  if ! grep -q "\`$name\`" "$out/tables"; then
    echo "FAILED: the library reads $name, which the settings table does not list"
    failed=$((failed + 1))
  fi
done <"$out/read"
echo "ok: $(wc -l <"$out/read") variables read by the library checked against the table"

# Every other RR_ name in the tree is documented: not a name of the public header, not a
# compile-time macro (-DRR_..., #if/#ifdef/#define RR_...).
files=()
for d in base cli engine kernels transport test bench scripts fuzz examples .ci; do
  [ -d "$src/$d" ] && while IFS= read -r f; do files+=("$f"); done < <(
    find "$src/$d" -type f \( -name '*.cc' -o -name '*.h' -o -name '*.cu' -o -name '*.c' -o -name '*.sh' \
      -o -name '*.py' -o -name meson.build -o -name run \))
done
files+=("$src/meson.build")
grep -ohE '\bRR_[A-Z0-9_]*[A-Z0-9]\b' "$src/include/ringreduce/ringreduce.h" | sort -u >"$out/api"
grep -ohE '(-D|#if |#ifdef |#ifndef |#define |defined\()RR_[A-Z0-9_]+' "${files[@]}" "$src/meson.build" |
  grep -oE 'RR_[A-Z0-9_]+' | sort -u >"$out/macros"
grep -ohE '\bRR_[A-Z0-9_]*[A-Z0-9]\b' "${files[@]}" | sort -u | comm -23 - "$out/api" | comm -23 - "$out/macros" >"$out/names"
cat "$src/README.md" "$src"/docs/*.md >"$out/docs"
missing=0
while read -r name; do
  if ! grep -qE "\b$name\b" "$out/docs"; then
    echo "FAILED: $name is used in the tree ($(grep -lE "\b$name\b" "${files[@]}" | head -1 | sed "s|^$src/||")) but in no document"
    missing=$((missing + 1))
  fi
done <"$out/names"
failed=$((failed + missing))
echo "ok: $(wc -l <"$out/names") RR_ names of the tree checked against the docs ($missing missing)"

[ "$failed" = 0 ] || { echo "$failed failed"; exit 1; }
