#!/bin/bash
# The shared library's dynamic symbol table is its ABI: every symbol it
# defines must carry the flashattn_ prefix (anything else is an internal
# function escaping the hidden-visibility default, free to clash with the
# user's own), every function the public header declares FLASHATTN_API must
# be there, and nothing flashattn_ may be exported that the header does not
# declare (an internal helper made visible by mistake).
# Usage: bash test_exported_symbols.sh path/to/libflashattn.so path/to/flashattn.h
set -u
LIB=${1:?usage: test_exported_symbols.sh LIB HEADER} HEADER=${2:?}
command -v nm >/dev/null || { echo "FAIL: nm (binutils) is needed"; exit 1; }
[ -f "$LIB" ] || { echo "FAIL: $LIB does not exist"; exit 1; }
failures=0
# Every defined symbol in .dynsym is exported (global or weak), whatever its
# letter: T, D, B, R, W, V, i, u...
exported=$(nm -D --defined-only "$LIB" | awk 'NF >= 3 { print $3 }' | sed 's/@.*//' | sort -u) ||
  { echo "FAIL: nm -D $LIB failed"; exit 1; }
[ -n "$exported" ] || { echo "FAIL: $LIB exports nothing"; exit 1; }
offenders=$(grep -v '^flashattn_' <<<"$exported")
if [ -n "$offenders" ]; then
  echo "FAIL: $LIB exports symbols without the flashattn_ prefix:"
  sed 's/^/  /' <<<"$offenders"
  failures=$((failures + 1))
fi
# The declarations, from the header with its comments removed (by perl, not
# the preprocessor: it would expand FLASHATTN_API, and only gcc has
# -fpreprocessed to stop it); both branches of every #if are kept.
declared=$(perl -0777 -pe 's{/\*.*?\*/}{ }gs; s{//[^\n]*}{}g' "$HEADER" | grep -v '^[[:space:]]*#' | tr '\n' ' ' |
  grep -o 'FLASHATTN_API[^;{}()]*(' |
  sed -E 's/.*[^A-Za-z0-9_]([A-Za-z_][A-Za-z0-9_]*)[[:space:]]*\($/\1/' | sort -u)
[ -n "$declared" ] || { echo "FAIL: found no FLASHATTN_API function in $HEADER"; exit 1; }
missing=$(comm -23 <(echo "$declared") <(echo "$exported"))
if [ -n "$missing" ]; then
  echo "FAIL: declared FLASHATTN_API in $(basename "$HEADER") but not exported by $LIB:"
  sed 's/^/  /' <<<"$missing"
  failures=$((failures + 1))
fi
undeclared=$(comm -13 <(echo "$declared") <(grep '^flashattn_' <<<"$exported"))
if [ -n "$undeclared" ]; then
  echo "FAIL: exported by $LIB but not declared FLASHATTN_API in $(basename "$HEADER"):"
  sed 's/^/  /' <<<"$undeclared"
  failures=$((failures + 1))
fi
[ $failures = 0 ] || exit 1
echo "test_exported_symbols: $(wc -l <<<"$exported") symbols exported, all flashattn_, all $(wc -l <<<"$declared") declared in the header"
