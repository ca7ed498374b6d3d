#!/bin/bash
# The `flashattn` command line: info, check --quick, and run on .npy files
# made here with python3's standard library only (no numpy), compared with a
# small pure-Python attention in double precision; then malformed inputs
# and bad options, each of which must fail without creating an output file.
# Usage: bash test_cli.sh path/to/flashattn
set -u
BIN=${1:?usage: test_cli.sh path/to/flashattn}
command -v python3 >/dev/null || { echo "test_cli.sh: python3 is needed"; exit 1; }
[ -x "$BIN" ] || { echo "test_cli.sh: $BIN is not an executable"; exit 1; }
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
T=$(mktemp -d "${TMPDIR:-/tmp}/fa_test_cli.XXXXXX")
trap 'rm -rf "$T"' EXIT
IN=$T/in OUT=$T/out
mkdir -p "$IN" "$OUT"
failures=0 passes=0
pass() { passes=$((passes + 1)); }
fail() { failures=$((failures + 1)); echo "FAIL: $*"; }

cat >"$T/npyutil.py" <<'PY'
"""Write and read .npy files and compute attention, standard library only."""
import ast, math, os, random, struct, sys

def bf16_bits(x):
    """float -> bfloat16 bits, round to nearest even (as the library does)."""
    u = struct.unpack('<I', struct.pack('<f', x))[0]
    u += 0x7fff + ((u >> 16) & 1)
    return (u >> 16) & 0xffff

def bf16_value(b):
    return struct.unpack('<f', struct.pack('<I', b << 16))[0]

def header_bytes(descr, shape, version=(1, 0), fortran=False):
    text = "{'descr': '%s', 'fortran_order': %s, 'shape': (%s), }" % (
        descr, fortran, ''.join('%d, ' % d for d in shape).rstrip(' ') if len(shape) != 1 else '%d,' % shape[0])
    pre = 10 if version[0] == 1 else 12
    pad = (64 - (pre + len(text) + 1) % 64) % 64
    text = text + ' ' * pad + '\n'
    n = struct.pack('<H', len(text)) if version[0] == 1 else struct.pack('<I', len(text))
    return b'\x93NUMPY' + bytes(version) + n + text.encode('latin1')

def encode(dtype, values):
    if dtype == 'f32': return struct.pack('<%df' % len(values), *values)
    if dtype == 'f16': return struct.pack('<%de' % len(values), *values)
    return struct.pack('<%dH' % len(values), *[bf16_bits(v) for v in values])

DESCR = {'f32': '<f4', 'f16': '<f2', 'bf16': '<u2'}

def write(path, dtype, shape, values, version=(1, 0)):
    with open(path, 'wb') as f:
        f.write(header_bytes(DESCR[dtype], shape, version) + encode(dtype, values))

def read(path):
    data = open(path, 'rb').read()
    assert data[:6] == b'\x93NUMPY', 'bad magic'
    if data[6] == 1:
        n, pre = struct.unpack('<H', data[8:10])[0], 10
    else:
        n, pre = struct.unpack('<I', data[8:12])[0], 12
    h = ast.literal_eval(data[pre:pre + n].decode('latin1'))
    assert (pre + n) % 64 == 0, 'data not aligned'
    assert not h['fortran_order']
    count = 1
    for d in h['shape']: count *= d
    fmt = {'<f4': 'f', '<f2': 'e', '<u2': 'H'}[h['descr']]
    body = data[pre + n:]
    assert len(body) == count * struct.calcsize(fmt), 'size mismatch'
    vals = list(struct.unpack('<%d%s' % (count, fmt), body))
    if h['descr'] == '<u2': vals = [bf16_value(v) for v in vals]
    return h['descr'], tuple(h['shape']), vals

# name: dtype, b, sq, sk, hq, hkv, d, layout, causal, window, align, scale, threads, version
CASES = {
    'plain_f32':  ('f32', 2, 5, 7, 2, 2, 8, 'bshd', 0, None, None, None, None, (1, 0)),
    'gqa_bhsd':   ('f32', 1, 6, 6, 4, 2, 3, 'bhsd', 1, None, None, None, 2, (1, 0)),
    'mqa_f16':    ('f16', 2, 7, 4, 3, 1, 16, 'bshd', 0, (2, 1), 'top-left', 0.3, None, (1, 0)),
    'empty_rows_bf16': ('bf16', 1, 9, 3, 2, 1, 5, 'bshd', 1, None, 'bottom-right', None, 1, (1, 0)),
    'v2_header':  ('f32', 1, 3, 4, 1, 1, 4, 'bshd', 0, None, None, None, None, (2, 0)),
    'v3_header':  ('f16', 1, 4, 3, 2, 2, 2, 'bhsd', 0, (-1, 0), None, None, None, (3, 0)),
}

def dims(case, which):
    dt, b, sq, sk, hq, hkv, d, layout = case[:8]
    s, h = (sq, hq) if which == 'q' else (sk, hkv)
    return (b, s, h, d) if layout == 'bshd' else (b, h, s, d)

def index(layout, shape, b, s, h, c):
    if layout == 'bshd': return ((b * shape[1] + s) * shape[2] + h) * shape[3] + c
    return ((b * shape[1] + h) * shape[2] + s) * shape[3] + c

def gen(name, d):
    case = CASES[name]
    rnd = random.Random(name)
    for t in 'qkv':
        shape = dims(case, t)
        n = 1
        for x in shape: n *= x
        write(os.path.join(d, name + '_' + t + '.npy'), case[0], shape,
              [rnd.gauss(0, 1) for _ in range(n)], case[13])
    causal, window, align, scale, threads = case[8:13]
    args = ['-q', name + '_q.npy', '-k', name + '_k.npy', '-v', name + '_v.npy', '--layout', case[7]]
    if causal: args.append('--causal')
    if window: args += ['--window', '%d,%d' % window]
    if align: args += ['--align', align]
    if scale: args += ['--scale', repr(scale)]
    if threads: args += ['--threads', str(threads)]
    if case[0] == 'bf16': args.append('--bf16')
    print(' '.join(args))

def reference(name, d):
    dt, B, SQ, SK, HQ, HKV, D, layout, causal, window, align, scale = CASES[name][:12]
    q = read(os.path.join(d, name + '_q.npy'))[2]
    k = read(os.path.join(d, name + '_k.npy'))[2]
    v = read(os.path.join(d, name + '_v.npy'))[2]
    qs, ks = dims(CASES[name], 'q'), dims(CASES[name], 'k')
    scale = scale or 1 / math.sqrt(D)
    diag = 0 if align == 'top-left' else SK - SQ
    left, right = window if window else (-1, -1)
    if causal: right = 0
    out, lse = {}, {}
    for b in range(B):
        for h in range(HQ):
            hk = h // (HQ // HKV)
            for i in range(SQ):
                keys = [j for j in range(SK) if (left < 0 or j >= i + diag - left) and (right < 0 or j <= i + diag + right)]
                sc = {j: scale * sum(q[index(layout, qs, b, i, h, c)] * k[index(layout, ks, b, j, hk, c)] for c in range(D)) for j in keys}
                m = max(sc.values()) if keys else 0.0
                p = {j: math.exp(sc[j] - m) for j in keys}
                tot = sum(p.values())
                for c in range(D):
                    out[(b, i, h, c)] = sum(p[j] * v[index(layout, ks, b, j, hk, c)] for j in keys) / tot if keys else 0.0
                lse[(b, h, i)] = m + math.log(tot) if keys else -math.inf
    return out, lse

# One ulp of the output dtype, relative (rounding O gives at most half of it;
# f32 arithmetic before the rounding can push it over a rounding boundary).
TOL = {'f32': 2e-6, 'f16': 1e-3, 'bf16': 8e-3}

def verify(name, d, o_path, lse_path):
    case = CASES[name]
    dt, B, SQ, SK, HQ, HKV, D, layout = case[:8]
    out, lse = reference(name, d)
    descr, shape, got = read(o_path)
    assert descr == DESCR[dt], 'O dtype %s' % descr
    assert shape == dims(case, 'q'), 'O shape %s' % (shape,)
    worst = 0.0
    for (b, i, h, c), want in out.items():
        e = abs(got[index(layout, shape, b, i, h, c)] - want)
        assert e <= TOL[dt] * max(1.0, abs(want)), '%s: O[%d,%d,%d,%d] = %r, want %r' % (name, b, i, h, c, got[index(layout, shape, b, i, h, c)], want)
        worst = max(worst, e)
    if lse_path:
        descr, shape, got = read(lse_path)
        assert descr == '<f4' and shape == (B, HQ, SQ), 'LSE header %s %s' % (descr, shape)
        for (b, h, i), want in lse.items():
            g = got[(b * HQ + h) * SQ + i]
            if want == -math.inf:
                assert g == -math.inf, '%s: LSE[%d,%d,%d] = %r, want -inf' % (name, b, h, i, g)
            else:
                assert abs(g - want) <= 1e-5 * max(1.0, abs(want)), '%s: LSE[%d,%d,%d] = %r, want %r' % (name, b, h, i, g, want)
    print('%s: max |O - reference| = %.3g' % (name, worst))

def bad(kind, path):
    """A malformed or unusable input, written to path."""
    good = lambda dt, shape, **kw: header_bytes(DESCR.get(dt, dt), shape, **kw) + b'\0' * (4 * math.prod(shape))
    files = {
        'bad_magic': b'\x93NUMPX\x01\x00' + good('f32', (1, 2, 1, 4))[8:],
        'truncated': good('f32', (1, 2, 1, 4))[:-3],
        'header_cut': good('f32', (1, 2, 1, 4))[:40],
        'f64': header_bytes('<f8', (1, 2, 1, 4)) + b'\0' * 64,
        'int32': header_bytes('<i4', (1, 2, 1, 4)) + b'\0' * 32,
        'big_endian': header_bytes('>f4', (1, 2, 1, 4)) + b'\0' * 32,
        'three_d': good('f32', (2, 1, 4)),
        'fortran': header_bytes('<f4', (1, 2, 1, 4), fortran=True) + b'\0' * 32,
        'lies': header_bytes('<f4', (1, 64, 1, 4)) + b'\0' * 32,
        'overflow': header_bytes('<f4', (2**40, 2**40, 1, 1)) + b'\0' * 32,
        'huge': header_bytes('<f4', (1, 2**40, 1, 4)) + b'\0' * 32,
        'trailing': good('f32', (1, 2, 1, 4)) + b'\0',
        'not_a_dict': b'\x93NUMPY\x01\x00\x0a\x00' + b'[1, 2, 3]\n',
        'version_9': b'\x93NUMPY\x09\x00' + good('f32', (1, 2, 1, 4))[8:],
        'dim_300': good('f32', (1, 2, 1, 300)),
        'heads_3': good('f32', (1, 2, 3, 4)),
        'f16': header_bytes('<f2', (1, 2, 1, 4)) + b'\0' * 16,
        'u2': header_bytes('<u2', (1, 2, 1, 4)) + b'\0' * 16,
        'dim_8': good('f32', (1, 2, 1, 8)),
        'good': good('f32', (1, 2, 1, 4)),
        'good_h2': good('f32', (1, 2, 2, 4)),
    }
    open(path, 'wb').write(files[kind])

if __name__ == '__main__':
    cmd = sys.argv[1]
    try:
        if cmd == 'gen': gen(sys.argv[2], sys.argv[3])
        elif cmd == 'verify': verify(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5] if len(sys.argv) > 5 else None)
        elif cmd == 'bad': bad(sys.argv[2], sys.argv[3])
    except AssertionError as e:
        print('mismatch:', e)
        sys.exit(1)
PY
PY="python3 $T/npyutil.py"

# ---- info ----
if out=$("$BIN" info 2>&1) && grep -q "kernel path" <<<"$out" && grep -Eq "L1d [0-9]+ KiB" <<<"$out" \
    && grep -q "available paths.*scalar" <<<"$out" && grep -q "threads" <<<"$out" && grep -q "^int8 q k^T  " <<<"$out"; then pass
else fail "info: $out"; fi
"$BIN" info --bogus >/dev/null 2>&1 && fail "info --bogus should fail" || pass

# ---- check ----
if out=$("$BIN" check --quick 2>&1) && [ "$(tail -n 1 <<<"$out")" = PASS ] && grep -q "^  ok \[scalar\]" <<<"$out" \
    && ! grep -q "^FAIL" <<<"$out"; then pass
else fail "check --quick: $(grep -E '^FAIL|summary' <<<"$out" | head -5)"; fi
for args in "--isa nosuch" "--seed x" "--section nosuch" "--bogus"; do
    "$BIN" check $args >/dev/null 2>&1; rc=$?
    [ $rc -eq 2 ] && pass || fail "check $args: exit $rc, wanted 2"
done

# ---- run: results against the Python reference ----
for c in plain_f32 gqa_bhsd mqa_f16 empty_rows_bf16 v2_header v3_header; do
    args=$(cd "$IN" && $PY gen $c .) || { fail "gen $c"; continue; }
    if (cd "$IN" && "$BIN" run $args -o "$OUT/$c.npy" --lse "$OUT/${c}_lse.npy"); then
        if msg=$($PY verify $c "$IN" "$OUT/$c.npy" "$OUT/${c}_lse.npy"); then pass; echo "$msg"
        else fail "run $c: $msg"; fi
    else fail "run $c exited $?"; fi
done
# without --lse, only O is written
(cd "$IN" && "$BIN" run $($PY gen plain_f32 .) -o "$OUT/nolse.npy") && [ -f "$OUT/nolse.npy" ] && pass \
    || fail "run without --lse"
rm -f "$OUT"/*

# ---- run: malformed inputs and bad options must fail and write nothing ----
for k in bad_magic truncated header_cut f64 int32 big_endian three_d fortran lies overflow huge trailing \
         not_a_dict version_9 dim_300 heads_3 f16 u2 dim_8 good good_h2; do
    $PY bad $k "$IN/$k.npy"
done
G="$IN/good.npy"
expect_fail() { # description, then the run arguments
    local what=$1; shift
    local err
    err=$("$BIN" run "$@" 2>&1 >/dev/null); local rc=$?
    local left; left=$(ls -A "$OUT")
    # 1 (bad input) or 2 (bad usage): a crash or a sanitizer abort is not a refusal
    if { [ $rc -eq 1 ] || [ $rc -eq 2 ]; } && [ -z "$left" ] && [ -n "$err" ]; then pass
    else fail "$what: exit $rc, files left: [$left], message: [$err]"; rm -rf "${OUT:?}"/* "$OUT"/.[!.]*; fi
}
for k in bad_magic truncated header_cut f64 int32 big_endian three_d fortran lies overflow huge trailing \
         not_a_dict version_9 dim_300; do
    expect_fail "bad Q ($k)" -q "$IN/$k.npy" -k "$G" -v "$G" -o "$OUT/o.npy" --lse "$OUT/l.npy"
    expect_fail "bad V ($k)" -q "$G" -k "$G" -v "$IN/$k.npy" -o "$OUT/o.npy"
done
expect_fail "heads_q not a multiple of heads_kv" -q "$IN/heads_3.npy" -k "$IN/good_h2.npy" -v "$IN/good_h2.npy" -o "$OUT/o.npy"
expect_fail "K head_dim differs" -q "$G" -k "$IN/dim_8.npy" -v "$IN/dim_8.npy" -o "$OUT/o.npy"
expect_fail "V heads differ from K" -q "$IN/good_h2.npy" -k "$G" -v "$IN/good_h2.npy" -o "$OUT/o.npy"
expect_fail "mixed dtypes" -q "$G" -k "$IN/f16.npy" -v "$G" -o "$OUT/o.npy"
expect_fail "<u2 without --bf16" -q "$IN/u2.npy" -k "$IN/u2.npy" -v "$IN/u2.npy" -o "$OUT/o.npy"
expect_fail "--bf16 with <f4" -q "$G" -k "$G" -v "$G" -o "$OUT/o.npy" --bf16
expect_fail "missing input" -q "$IN/nosuch.npy" -k "$G" -v "$G" -o "$OUT/o.npy"
expect_fail "missing -o" -q "$G" -k "$G" -v "$G"
expect_fail "output directory missing" -q "$G" -k "$G" -v "$G" -o "$OUT/no/such/o.npy"
expect_fail "LSE directory missing" -q "$G" -k "$G" -v "$G" -o "$OUT/o.npy" --lse "$OUT/no/such/l.npy"
for opt in "--window 1" "--window a,b" "--window -2,0" "--window 1,2,3" "--align middle" "--layout sbhd" \
           "--threads -1" "--threads x" "--scale nan" "--scale 1e99" "--scale" "--bogus"; do
    expect_fail "option $opt" -q "$G" -k "$G" -v "$G" -o "$OUT/o.npy" $opt
done
# a failed run leaves an existing output as it was
echo keep >"$OUT/o.npy"
"$BIN" run -q "$IN/truncated.npy" -k "$G" -v "$G" -o "$OUT/o.npy" 2>/dev/null \
    && fail "truncated input accepted" || { [ "$(cat "$OUT/o.npy")" = keep ] && pass || fail "existing output clobbered"; }
[ "$(ls -A "$OUT")" = o.npy ] && pass || fail "stray files: $(ls -A "$OUT")"

echo "test_cli.sh: $passes passed, $failures failed"
[ $failures -eq 0 ]
