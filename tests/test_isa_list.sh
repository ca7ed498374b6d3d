#!/usr/bin/env bash
# The kernel paths are named in one list, src/kernels/isa_list.h; every
# place that spells them out for users must spell the same list, in its
# order: each "FLASHATTN_ISA=a|b|..." in the public header, the Python
# package and docs/cli.md. The CLI ($1) must list the same names in
# `flashattn check --help`, and `flashattn info` only paths of the list.
set -u
root="$(cd "$(dirname "$0")/.." && pwd)"
cli="$1"
list=$(sed -n 's/^FA_ISA(\([a-z0-9_]*\),.*/\1/p' "$root/src/kernels/isa_list.h" | paste -sd'|' -)
[ -n "$list" ] || { echo "FAIL: no FA_ISA lines in src/kernels/isa_list.h"; exit 1; }
bad=0
for f in include/flashattn.h python/flashattn/__init__.py docs/cli.md; do
  found=$(grep -o 'FLASHATTN_ISA=[a-z0-9_|\\]*[a-z0-9_]' "$root/$f" | sed 's/\\//g' | sort -u)
  if [ -z "$found" ]; then
    echo "FAIL: $f names no FLASHATTN_ISA=... list"
    bad=$((bad + 1))
  fi
  for l in $found; do
    case "$l" in *'|'*) ;; *) continue ;; esac # a single path forced in an example
    if [ "$l" != "FLASHATTN_ISA=$list" ]; then
      echo "FAIL: $f says $l, the list is $list"
      bad=$((bad + 1))
    fi
  done
done
help=$("$cli" check --help | sed -n 's/.*--isa NAME *only this path: *//p' | tr ' ' '|')
[ "$help" = "$list" ] || { echo "FAIL: flashattn check --help lists '$help', the list is $list"; bad=$((bad + 1)); }
for p in $("$cli" info | sed -n 's/^available paths *//p' | sed 's/ *(.*//'); do
  case "|$list|" in *"|$p|"*) ;; *) echo "FAIL: flashattn info lists $p, not in the list"; bad=$((bad + 1)) ;; esac
done
[ "$bad" -eq 0 ] || exit 1
echo "ok: $list"
