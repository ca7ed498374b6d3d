#!/usr/bin/env bash
# The layers of src/ (docs/architecture.md), bottom first. A file may include
# the public header and headers of its own layer or of a layer below it;
# an include that goes up a layer fails the test. The side libraries for
# tools and tests (reference, baseline) sit above the library and the tool
# API above them; the library itself never includes them. The MPI component
# (mpi) is a client of the public header only. The command-line
# tool (tools/flashattn) reaches the library only through the public header
# and the tool API (src/tool/).
set -u
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
level() {
  case "$1" in
    core) echo 0 ;; kernels) echo 1 ;; dispatch) echo 2 ;; plan) echo 3 ;;
    driver) echo 4 ;; api) echo 5 ;; reference | baseline | mpi) echo 6 ;; tool) echo 7 ;;
    *) echo -1 ;;
  esac
}
bad=0
checked=0
while IFS= read -r file; do
  from="${file#src/}"
  from="${from%%/*}"
  lf=$(level "$from")
  if [ "$lf" -lt 0 ]; then
    echo "FAIL: $file is in src/$from/, which is not a known layer"
    bad=$((bad + 1))
    continue
  fi
  while IFS= read -r inc; do
    checked=$((checked + 1))
    [ "$inc" = flashattn.h ] && continue
    [ "$inc" = flashattn_mpi.h ] && continue
    to="${inc%%/*}"
    if [ "$to" = "$inc" ]; then
      echo "FAIL: $file includes \"$inc\": name a layer (\"core/...\")"
      bad=$((bad + 1))
      continue
    fi
    lt=$(level "$to")
    if [ "$from" = mpi ] && [ "$to" != mpi ]; then
      echo "FAIL: $file includes \"$inc\": the MPI component reaches the library through flashattn.h only"
      bad=$((bad + 1))
    elif [ "$lt" -lt 0 ]; then
      echo "FAIL: $file includes \"$inc\", not in a layer of src/"
      bad=$((bad + 1))
    elif [ "$lt" -gt "$lf" ] || { [ "$lf" -eq 6 ] && [ "$lt" -eq 6 ] && [ "$to" != "$from" ] && [ "$from" = reference ]; }; then
      echo "FAIL: $file ($from, layer $lf) includes \"$inc\" ($to, layer $lt): an include upward"
      bad=$((bad + 1))
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file")
done < <(find src -name '*.[ch]' | sort)

# The command-line tool: the public header, its own headers, the tool API
# and the tools' own libraries (the references and the baseline).
while IFS= read -r file; do
  while IFS= read -r inc; do
    checked=$((checked + 1))
    case "$inc" in
      flashattn.h | flashattn_mpi.h | tool/* | reference/* | baseline/*) ;;
      */*) echo "FAIL: $file includes \"$inc\": the CLI reaches the library through tool/tool.h only"
           bad=$((bad + 1)) ;;
      *) [ -f "tools/flashattn/$inc" ] || { echo "FAIL: $file includes \"$inc\", not a CLI header"; bad=$((bad + 1)); } ;;
    esac
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file")
done < <(find tools/flashattn -name '*.[ch]' | sort)

[ "$checked" -gt 100 ] || { echo "FAIL: only $checked includes found: is the tree where this test thinks?"; exit 1; }
if [ "$bad" -gt 0 ]; then
  echo "$bad upward or unknown includes (of $checked)"
  exit 1
fi
echo "ok: $checked includes, none upward"
