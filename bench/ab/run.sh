#!/usr/bin/env bash
# Compare two builds of the library: bit for bit on every kernel path this
# CPU runs, then their speed in one process.
#   bench/ab/run.sh OLD_BUILD_DIR NEW_BUILD_DIR [all|fwd|bwd|dec|focus|short|fshort|tiny|window|bits]
# (build directories of two checkouts, e.g. `git worktree add ../old <rev>`
# and `cmake -S ../old -B ../old/build -DCMAKE_BUILD_TYPE=Release`).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
old="$(cd "$1" && pwd)" new="$(cd "$2" && pwd)" what="${3:-all}"
inc="$here/../../include"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
lib() { ls "$1"/libflashattn.so.*.*.* | head -1; }
for side in old new; do
  dir=${!side}
  cc -O2 -std=gnu11 "$here/ab_bits.c" -I "$inc" -L "$dir" -lflashattn -lm -Wl,-rpath,"$dir" -o "$out/bits_$side"
done
isas=$("$new/flashattn" info | sed -n 's/^available paths *//p' | sed 's/ *(.*//')
status=0
for isa in $isas; do
  FLASHATTN_ISA=$isa "$out/bits_old" > "$out/old_$isa.txt"
  FLASHATTN_ISA=$isa "$out/bits_new" > "$out/new_$isa.txt"
  if cmp -s "$out/old_$isa.txt" "$out/new_$isa.txt"; then
    echo "$isa: $(wc -l < "$out/new_$isa.txt") cases bit-identical"
  else
    echo "$isa: outputs differ:"; { diff "$out/old_$isa.txt" "$out/new_$isa.txt" || true; } | head -20; status=1
  fi
done
[ "$what" = bits ] && exit $status
cc -O2 -std=gnu11 "$here/ab_time.c" -I "$inc" -ldl -o "$out/ab_time"
OMP_PROC_BIND=${OMP_PROC_BIND:-spread} OMP_PLACES=${OMP_PLACES:-cores} "$out/ab_time" "$(lib "$old")" "$(lib "$new")" "$what"
exit $status
