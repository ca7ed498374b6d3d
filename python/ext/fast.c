/*
 * flashattn._fast: flash_attn_func's plain forward (no gradient to record,
 * no dropout, no modifiers) and flash_attn_with_kvcache's plain step in C,
 * for the calls whose whole cost is the call: at one query and one key the
 * Python steps around the library (checks, descriptors, params) took twice
 * the library's own time, and more than torch's whole SDPA call; a decode
 * step's took 24-30 us, a third of a step at 128 cached keys.
 *
 * It sees the library only through the function pointers the ctypes
 * binding hands to init(), so both use one loaded library (one thread-local
 * error message) whichever file FLASHATTN_LIBRARY names. It sees torch
 * only through the objects register_torch() hands it and the tensor
 * methods it calls (shape, stride(), data_ptr(), dtype, is_cpu,
 * requires_grad, is_contiguous()), so a test can drive it with any objects
 * that have them. Python's limited API (3.9): one build serves every
 * CPython 3.9+.
 *
 * bwd() fills the gradients of fwd()'s call (the autograd Function's
 * backward of flash_attn_func's plain calls) and returns the library's
 * status, or None where it does not take the call.
 *
 * fwd() and decode() return (out, lse or None) on success; None where the
 * call is not one it takes (another type, dtype or layout, a gradient to
 * record, an option of another type, a shape the Python path checks
 * first): the Python path then runs, and says what is wrong; or the
 * library's status (an int) when the library refused the call, which the
 * caller raises with the library's message, on this thread. Torch tracing
 * (torch.compile, jit.trace) is the caller's to rule out.
 */
#define PY_SSIZE_T_CLEAN
#define Py_LIMITED_API 0x03090000
#include <Python.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "flashattn.h"

typedef flashattn_status (*fwd_fn)(const flashattn_tensor *, const flashattn_tensor *,
                                   const flashattn_tensor *, const flashattn_tensor *, float *,
                                   const flashattn_params *, void *, size_t);
typedef flashattn_status (*fwd_size_fn)(const flashattn_tensor *, const flashattn_tensor *,
                                        const flashattn_tensor *, const flashattn_tensor *,
                                        const float *, const flashattn_params *, size_t *);

typedef flashattn_status (*decode_fn)(const flashattn_tensor *, const flashattn_kv_cache *,
                                      const flashattn_tensor *, const flashattn_tensor *,
                                      const flashattn_tensor *, float *, const flashattn_params *,
                                      void *, size_t);
typedef flashattn_status (*decode_size_fn)(const flashattn_tensor *, const flashattn_kv_cache *,
                                           const flashattn_tensor *, const flashattn_tensor *,
                                           const flashattn_tensor *, const float *,
                                           const flashattn_params *, size_t *);
typedef flashattn_status (*bwd_fn)(const flashattn_tensor *, const flashattn_tensor *,
                                   const flashattn_tensor *, const flashattn_tensor *,
                                   const flashattn_tensor *, const float *, const flashattn_tensor *,
                                   const flashattn_tensor *, const flashattn_tensor *,
                                   const flashattn_params *, void *, size_t);
typedef flashattn_status (*bwd_size_fn)(const flashattn_tensor *, const flashattn_tensor *,
                                        const flashattn_tensor *, const flashattn_tensor *,
                                        const flashattn_tensor *, const float *,
                                        const flashattn_tensor *, const flashattn_tensor *,
                                        const flashattn_tensor *, const flashattn_params *, size_t *);
typedef void (*params_init_fn)(flashattn_params *, size_t);
typedef void (*cache_init_fn)(flashattn_kv_cache *, size_t);

static fwd_fn lib_fwd;
static fwd_size_fn lib_fwd_size;
static params_init_fn lib_params_init;
/* NULL in a library without flashattn_decode: decode() then takes no call */
static decode_fn lib_decode;
static decode_size_fn lib_decode_size;
static cache_init_fn lib_cache_init;
/* NULL until init_bwd(): bwd() then takes no call */
static bwd_fn lib_bwd;
static bwd_size_fn lib_bwd_size;

/* What register_torch() gave: the tensor type, the three dtypes the plain
 * path reads in place with their flashattn codes, float32 for the LSE,
 * torch.empty_like, torch.empty and the kwargs dicts they are called with,
 * torch.is_grad_enabled and torch.get_num_threads. */
#define DTYPES 3
static PyObject *tensor_type, *dtypes[DTYPES], *lse_dtype_kw, *empty_like, *empty_like_kw, *empty;
static PyObject *grad_enabled, *num_threads, *int32_dtype, *int64_dtype;
static PyObject *registration; /* register_torch's arguments, for registered() */
static int dtype_codes[DTYPES];

/* Interned names of the attributes and methods used on every call. */
static PyObject *s_shape, *s_stride, *s_data_ptr, *s_dtype, *s_is_cpu, *s_is_contiguous,
    *s_requires_grad;

/* A thread's workspaces, LSE scratch and (decode) lengths: grown on
 * demand, kept between its calls (as the ctypes path keeps its own),
 * emptied by release() and freed when the thread exits (the key's
 * destructor), so a pool of short-lived threads does not leave one
 * workspace per thread. The backward has a workspace of its own: on one
 * shared with the forward, each call's threads found the lines they
 * write last written by the other core in the other call's layout, and a
 * 2-thread forward after a backward took 1.17x its time
 * (docs/performance.md). */
enum { WS_FWD, WS_BWD, WS_KINDS };
typedef struct {
    void *ws[WS_KINDS];
    size_t ws_bytes[WS_KINDS];
    float *lse;
    size_t lse_count;
    int64_t *lens; /* decode: one cache length for every sequence */
    size_t lens_count;
} thread_bufs;

static pthread_key_t bufs_key;
static _Thread_local thread_bufs *bufs; /* this thread's, once made */
static atomic_long live_bufs;           /* threads holding a set, for the tests */

static void bufs_empty(thread_bufs *b) {
    free(b->ws[WS_FWD]), free(b->ws[WS_BWD]), free(b->lse), free(b->lens);
    memset(b, 0, sizeof *b);
}

static void bufs_free(void *p) {
    bufs_empty((thread_bufs *)p);
    free(p);
    atomic_fetch_sub(&live_bufs, 1);
}

/* This thread's set, made on first use; NULL when out of memory. */
static thread_bufs *my_bufs(void) {
    if (bufs) return bufs;
    thread_bufs *b = (thread_bufs *)calloc(1, sizeof *b);
    if (!b) return NULL;
    if (pthread_setspecific(bufs_key, b)) {
        free(b);
        return NULL;
    }
    atomic_fetch_add(&live_bufs, 1);
    return bufs = b;
}

/* What fwd needs of one tensor argument. */
typedef struct {
    int64_t shape[4], stride[4];
    uintptr_t data;
    int code;
} view4;

/* An int64 from a Python int, -1 with an error set when it is not one. */
static int int64_of(PyObject *o, int64_t *out) {
    const long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred()) return -1;
    *out = (int64_t)v;
    return 0;
}

/* A 4-tuple (torch.Size or stride()) into out; 1 when it is not one. */
static int four_of(PyObject *t, int64_t out[4]) {
    if (!t || !PyTuple_Check(t) || PyTuple_Size(t) != 4) return 1;
    for (Py_ssize_t i = 0; i < 4; i++)
        if (int64_of(PyTuple_GetItem(t, i), &out[i])) return -1;
    return 0;
}

/* A tensor of the registered type on the CPU: its dtype (a new reference)
 * into *dt. 0, 1 (not taken) or -1 (a Python error is set). */
static int cpu_dtype(PyObject *t, PyObject **dt) {
    if ((PyObject *)Py_TYPE(t) != tensor_type) return 1;
    PyObject *cpu = PyObject_GetAttr(t, s_is_cpu);
    if (!cpu) return -1;
    const int on_cpu = cpu == Py_True;
    Py_DECREF(cpu);
    if (!on_cpu) return 1;
    *dt = PyObject_GetAttr(t, s_dtype);
    return *dt ? 0 : -1;
}

/* t.data_ptr() into *data: 0, or -1 with a Python error set. */
static int data_ptr_of(PyObject *t, void **data) {
    PyObject *ptr = PyObject_CallMethodObjArgs(t, s_data_ptr, NULL);
    if (!ptr) return -1;
    *data = PyLong_AsVoidPtr(ptr);
    Py_DECREF(ptr);
    return PyErr_Occurred() ? -1 : 0;
}

/* The view of a tensor the plain path takes: of the registered type, on
 * the CPU, 4-D, of one of the three dtypes, its last dimension contiguous.
 * Returns 0, 1 (not taken) or -1 (a Python error is set). */
static int view_of(PyObject *t, view4 *v) {
    PyObject *dt;
    int r = cpu_dtype(t, &dt);
    if (r) return r;
    v->code = -1;
    for (int i = 0; i < DTYPES; i++)
        if (dt == dtypes[i]) v->code = dtype_codes[i];
    Py_DECREF(dt);
    if (v->code < 0) return 1;
    PyObject *shape = PyObject_GetAttr(t, s_shape);
    if (!shape) return -1;
    r = four_of(shape, v->shape);
    Py_DECREF(shape);
    if (r) return r;
    PyObject *stride = PyObject_CallMethodObjArgs(t, s_stride, NULL);
    if (!stride) return -1;
    r = four_of(stride, v->stride);
    Py_DECREF(stride);
    if (r) return r;
    if (v->stride[3] != 1 && v->shape[3] > 1) return 1;
    void *data;
    if (data_ptr_of(t, &data)) return -1;
    v->data = (uintptr_t)data;
    return 0;
}

/* The library's descriptor of a view. A dimension of size 1 gets stride 0
 * (torch gives such dimensions any stride; the library checks strides
 * against the sizes they step over). */
static flashattn_tensor descriptor(const view4 *v) {
    flashattn_tensor d;
    memset(&d, 0, sizeof d);
    d.data = (void *)v->data;
    d.dtype = (flashattn_dtype)v->code;
    d.batch = v->shape[0], d.seqlen = v->shape[1], d.heads = v->shape[2], d.head_dim = v->shape[3];
    d.stride_batch = v->shape[0] > 1 ? v->stride[0] : 0;
    d.stride_seq = v->shape[1] > 1 ? v->stride[1] : 0;
    d.stride_head = v->shape[2] > 1 ? v->stride[2] : 0;
    d.stride_dim = 1;
    return d;
}

/* One library call: the forward (cache and grads NULL), decode against
 * cache, whose k and v are then k_new and v_new (both NULL: nothing to
 * append), or the backward (grads: dout, dq, dk, dv; lse read). */
typedef struct {
    const flashattn_tensor *q, *k, *v, *o;
    const flashattn_kv_cache *cache;
    float *lse;
    const flashattn_params *p;
    const flashattn_tensor *grads;
} lib_call;

static flashattn_status call_with(const lib_call *c, void *ws, size_t bytes) {
    const flashattn_tensor *g = c->grads;
    if (g) return lib_bwd(c->q, c->k, c->v, c->o, &g[0], c->lse, &g[1], &g[2], &g[3], c->p, ws, bytes);
    if (c->cache) return lib_decode(c->q, c->cache, c->k, c->v, c->o, c->lse, c->p, ws, bytes);
    return lib_fwd(c->q, c->k, c->v, c->o, c->lse, c->p, ws, bytes);
}

static flashattn_status size_of(const lib_call *c, size_t *need) {
    const flashattn_tensor *g = c->grads;
    if (g) return lib_bwd_size(c->q, c->k, c->v, c->o, &g[0], c->lse, &g[1], &g[2], &g[3], c->p, need);
    if (c->cache) return lib_decode_size(c->q, c->cache, c->k, c->v, c->o, c->lse, c->p, need);
    return lib_fwd_size(c->q, c->k, c->v, c->o, c->lse, c->p, need);
}

/* The call on this thread's workspace, grown when the library says it is
 * too small (it then wrote nothing); the GIL dropped meanwhile. */
static flashattn_status run_call(const lib_call *c) {
    flashattn_status s = FLASHATTN_ERR_WORKSPACE_TOO_SMALL;
    thread_bufs *b = my_bufs();
    if (!b) return FLASHATTN_ERR_OUT_OF_MEMORY;
    const int kind = c->grads ? WS_BWD : WS_FWD;
    PyThreadState *ts = PyEval_SaveThread();
    if (b->ws[kind]) s = call_with(c, b->ws[kind], b->ws_bytes[kind]);
    if (s == FLASHATTN_ERR_WORKSPACE_TOO_SMALL) {
        size_t need = 0;
        s = size_of(c, &need);
        if (s == FLASHATTN_OK) {
            if (need > b->ws_bytes[kind]) {
                /* 64-byte aligned; at least one line, so the buffer exists */
                void *fresh = NULL;
                const size_t bytes = (need + 63) / 64 * 64;
                if (posix_memalign(&fresh, 64, bytes ? bytes : 64)) {
                    s = FLASHATTN_ERR_OUT_OF_MEMORY;
                } else {
                    free(b->ws[kind]);
                    b->ws[kind] = fresh, b->ws_bytes[kind] = bytes ? bytes : 64;
                }
            }
            if (s == FLASHATTN_OK) s = call_with(c, b->ws[kind], b->ws_bytes[kind]);
        }
    }
    PyEval_RestoreThread(ts);
    return s;
}

/* Room for n floats of an LSE nobody reads; NULL with MemoryError set. */
static float *lse_scratch(int64_t n) {
    thread_bufs *b = my_bufs();
    if (!b) return (float *)PyErr_NoMemory();
    if ((size_t)n > b->lse_count) {
        const size_t count = (size_t)n < 256 ? 256 : (size_t)n;
        float *fresh = (float *)malloc(count * sizeof(float));
        if (!fresh) return (float *)PyErr_NoMemory();
        free(b->lse);
        b->lse = fresh, b->lse_count = count;
    }
    return b->lse;
}

/* An option the plain path takes as it comes: a bool, or an int (its
 * truth); 1 (not taken) for anything else, which the Python path checks. */
static int flag_of(PyObject *o, int *out) {
    if (!PyBool_Check(o) && !PyLong_CheckExact(o)) return 1;
    const int t = PyObject_IsTrue(o);
    if (t < 0) return -1;
    *out = t;
    return 0;
}

/* An exact int that fits int64, else 1 (not taken). */
static int exact_int64(PyObject *o, int64_t *out) {
    if (!PyLong_CheckExact(o)) return 1;
    int overflow = 0;
    const long long x = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow) return 1;
    if (x == -1 && PyErr_Occurred()) return -1;
    *out = (int64_t)x;
    return 0;
}

/* flash_attn_func's params (as flash_attn_interface._params builds them)
 * from plain Python values: softmax_scale None or a nonzero float or int,
 * causal and deterministic bools (or ints), window_size a tuple or list of
 * two ints. Anything else is 1 (not taken): the Python path validates it
 * and says what is wrong. */
static int params_of(PyObject *scale, PyObject *causal, PyObject *window, PyObject *det,
                     PyObject *splits, flashattn_params *p) {
    lib_params_init(p, sizeof *p);
    int r;
    if (scale != Py_None) {
        if (!PyFloat_CheckExact(scale) && !PyLong_CheckExact(scale)) return 1;
        const double f = PyFloat_AsDouble(scale);
        if (f == -1.0 && PyErr_Occurred()) return -1;
        if (f == 0.0) return 1;
        p->scale = (float)f;
    }
    if ((r = flag_of(causal, &p->causal)) || (r = flag_of(det, &p->deterministic))) return r;
    if (!(PyTuple_CheckExact(window) || PyList_CheckExact(window))) return 1;
    const int tuple = PyTuple_CheckExact(window);
    if ((tuple ? PyTuple_Size(window) : PyList_Size(window)) != 2) return 1;
    PyObject *left = tuple ? PyTuple_GetItem(window, 0) : PyList_GetItem(window, 0);
    PyObject *right = tuple ? PyTuple_GetItem(window, 1) : PyList_GetItem(window, 1);
    int64_t wl, wr;
    if ((r = exact_int64(left, &wl)) || (r = exact_int64(right, &wr))) return r;
    p->window_left = wl, p->window_right = wr;
    p->align = FLASHATTN_ALIGN_BOTTOM_RIGHT;
    PyObject *n = PyObject_CallObject(num_threads, NULL);
    if (!n) return -1;
    const long threads = PyLong_AsLong(n);
    Py_DECREF(n);
    if (threads == -1 && PyErr_Occurred()) return -1;
    if (threads < -2147483647L || threads > 2147483647L) return 1;
    p->num_threads = (int)threads;
    if (splits) {
        int64_t n;
        if ((r = exact_int64(splits, &n))) return r;
        if (n < -2147483647L || n > 2147483647L) return 1;
        p->num_splits = (int)n;
    }
    return 0;
}

/* 1 when a gradient would have to be recorded: grad mode on and one of
 * the tensors requires it (the Python path records it); -1 on error. */
static int records_grad(PyObject *const tensors[3]) {
    PyObject *on = PyObject_CallObject(grad_enabled, NULL);
    if (!on) return -1;
    const int enabled = on == Py_True;
    Py_DECREF(on);
    for (int i = 0; enabled && i < 3; i++) {
        PyObject *rg = PyObject_GetAttr(tensors[i], s_requires_grad);
        if (!rg) return -1;
        const int requires = rg == Py_True;
        Py_DECREF(rg);
        if (requires) return 1;
    }
    return 0;
}

/* An output's address (its data_ptr()); 0 with an error set. */
static uintptr_t address_of(PyObject *t) {
    PyObject *ptr = PyObject_CallMethodObjArgs(t, s_data_ptr, NULL);
    const uintptr_t at = ptr ? (uintptr_t)PyLong_AsVoidPtr(ptr) : 0;
    Py_XDECREF(ptr);
    return at;
}

/* softmax_lse, (batch, heads, seqlen_q) float32, and its address in *at;
 * NULL with an error set. */
static PyObject *new_lse(int64_t b, int64_t h, int64_t sq, float **at) {
    PyObject *sizes = Py_BuildValue("(LLL)", (long long)b, (long long)h, (long long)sq);
    PyObject *lse = sizes ? PyObject_Call(empty, sizes, lse_dtype_kw) : NULL;
    Py_XDECREF(sizes);
    *at = lse ? (float *)address_of(lse) : NULL;
    if (lse && PyErr_Occurred()) Py_CLEAR(lse);
    return lse;
}

/* The call, then what fwd() and decode() return: (out, lse or None), or
 * the library's status. Takes the references to out and lse. */
static PyObject *call_and_return(const lib_call *c, PyObject *out, PyObject *lse) {
    const flashattn_status s = run_call(c);
    PyObject *result = s != FLASHATTN_OK ? PyLong_FromLong((long)s)
                                         : PyTuple_Pack(2, out, lse ? lse : Py_None);
    Py_DECREF(out);
    Py_XDECREF(lse);
    return result;
}

/* fwd(q, k, v, softmax_scale, causal, window_size, deterministic, want_lse) */
static PyObject *fast_fwd(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *q, *k, *v, *scale, *causal, *window, *det;
    int want_lse;
    if (!PyArg_ParseTuple(args, "OOOOOOOp", &q, &k, &v, &scale, &causal, &window, &det, &want_lse))
        return NULL;
    if (!lib_fwd || !tensor_type) {
        PyErr_SetString(PyExc_RuntimeError, "flashattn._fast: init() and register_torch() first");
        return NULL;
    }
    view4 in[3];
    PyObject *const tensors[3] = {q, k, v};
    for (int i = 0; i < 3; i++) {
        const int r = view_of(tensors[i], &in[i]);
        if (r < 0) return NULL;
        if (r > 0) Py_RETURN_NONE;
    }
    const int grad = records_grad(tensors);
    if (grad < 0) return NULL;
    if (grad) Py_RETURN_NONE;
    flashattn_params params;
    const int r = params_of(scale, causal, window, det, NULL, &params);
    if (r < 0) return NULL;
    if (r > 0) Py_RETURN_NONE;
    const flashattn_params *p = &params;
    if (in[1].code != in[0].code || in[2].code != in[0].code || in[2].shape[3] != in[0].shape[3])
        Py_RETURN_NONE;
    const int64_t b = in[0].shape[0], sq = in[0].shape[1], h = in[0].shape[2], d = in[0].shape[3];
    if (b < 0 || sq < 0 || h < 0 || d < 0) Py_RETURN_NONE;

    /* out: contiguous (batch, seqlen, heads, head_dim) whatever q's strides */
    PyObject *contiguous = PyObject_CallMethodObjArgs(q, s_is_contiguous, NULL);
    if (!contiguous) return NULL;
    PyObject *one = PyTuple_Pack(1, q);
    if (!one) {
        Py_DECREF(contiguous);
        return NULL;
    }
    PyObject *out = PyObject_Call(empty_like, one, contiguous == Py_True ? NULL : empty_like_kw);
    Py_DECREF(contiguous);
    Py_DECREF(one);
    if (!out) return NULL;
    /* out is q's size and dtype, contiguous: only its address is asked */
    view4 o = in[0];
    o.stride[0] = sq * h * d, o.stride[1] = h * d, o.stride[2] = d, o.stride[3] = 1;
    o.data = address_of(out);
    PyObject *lse = NULL;
    float *lse_at = NULL;
    if (!PyErr_Occurred()) {
        if (want_lse) lse = new_lse(b, h, sq, &lse_at);
        else lse_at = lse_scratch(b * h * sq); /* b * h * sq fits: the tensors exist */
    }
    if (PyErr_Occurred()) {
        Py_DECREF(out);
        Py_XDECREF(lse);
        return NULL;
    }
    const flashattn_tensor t[4] = {descriptor(&in[0]), descriptor(&in[1]), descriptor(&in[2]),
                                   descriptor(&o)};
    const lib_call c = {&t[0], &t[1], &t[2], &t[3], NULL, lse_at, p, NULL};
    return call_and_return(&c, out, lse);
}

/* bwd(q, k, v, out, dout, dq, dk, dv, lse_address, softmax_scale, causal,
 * window_size, deterministic): the gradients of fwd()'s call into dq, dk,
 * dv (tensors the caller made, of their inputs' shapes), for the autograd
 * Function of flash_attn_func's plain calls; lse_address is the forward's
 * softmax_lse's data_ptr(). The library's status, or None where a tensor
 * or option is not one fwd() would take (the Python path then runs). */
static PyObject *fast_bwd(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *x[8], *lse_o, *scale, *causal, *window, *det;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOO", &x[0], &x[1], &x[2], &x[3], &x[4], &x[5], &x[6], &x[7],
                          &lse_o, &scale, &causal, &window, &det))
        return NULL;
    if (!lib_bwd || !tensor_type) Py_RETURN_NONE;
    view4 in[8];
    for (int i = 0; i < 8; i++) {
        const int r = view_of(x[i], &in[i]);
        if (r < 0) return NULL;
        if (r > 0) Py_RETURN_NONE;
    }
    for (int i = 1; i < 8; i++)
        if (in[i].code != in[0].code) Py_RETURN_NONE;
    float *lse = (float *)PyLong_AsVoidPtr(lse_o);
    if (!lse && PyErr_Occurred()) return NULL;
    flashattn_params params;
    const int r = params_of(scale, causal, window, det, NULL, &params);
    if (r < 0) return NULL;
    if (r > 0) Py_RETURN_NONE;
    flashattn_tensor t[8];
    for (int i = 0; i < 8; i++) t[i] = descriptor(&in[i]);
    const lib_call c = {&t[0], &t[1], &t[2], &t[3], NULL, lse, &params, &t[4]};
    return PyLong_FromLong((long)run_call(&c));
}

/* An integer tensor the decode call reads as it lies: of the registered
 * type, on the CPU, of `dtype` (or int64 too, when i64 is given), ndim-D,
 * row-major. Its sizes into shape. 0, 1 (not taken) or -1 (error). */
static int index_of(PyObject *t, int ndim, int64_t shape[2], const void **data, int *i64) {
    PyObject *dt;
    int r = cpu_dtype(t, &dt);
    if (r) return r;
    const int is64 = dt == int64_dtype, is32 = dt == int32_dtype;
    Py_DECREF(dt);
    if (!is32 && !(is64 && i64)) return 1;
    if (i64) *i64 = is64;
    PyObject *size = PyObject_GetAttr(t, s_shape), *stride = NULL;
    if (!size) return -1;
    r = 1;
    int64_t st[2] = {0, 0};
    if (PyTuple_Check(size) && PyTuple_Size(size) == ndim) {
        r = 0;
        for (int i = 0; i < ndim && !r; i++) r = int64_of(PyTuple_GetItem(size, i), &shape[i]);
        stride = r ? NULL : PyObject_CallMethodObjArgs(t, s_stride, NULL);
        if (!r && !stride) r = -1;
        for (int i = 0; !r && i < ndim; i++) r = int64_of(PyTuple_GetItem(stride, i), &st[i]);
    }
    Py_DECREF(size);
    Py_XDECREF(stride);
    if (r) return r;
    /* row-major (a dimension of size 1 may have any stride) */
    if (shape[ndim - 1] > 1 && st[ndim - 1] != 1) return 1;
    if (ndim == 2 && shape[0] > 1 && st[0] != shape[1]) return 1;
    void *p;
    if (data_ptr_of(t, &p)) return -1;
    *data = p;
    return 0;
}

/* One length for every sequence: this thread's int64 buffer. */
static const int64_t *same_lengths(int64_t batch, int64_t len) {
    thread_bufs *b = my_bufs();
    if (!b) return (const int64_t *)PyErr_NoMemory();
    if ((size_t)batch > b->lens_count) {
        const size_t count = (size_t)batch < 64 ? 64 : (size_t)batch;
        int64_t *fresh = (int64_t *)malloc(count * sizeof(int64_t));
        if (!fresh) return (const int64_t *)PyErr_NoMemory();
        free(b->lens);
        b->lens = fresh, b->lens_count = count;
    }
    for (int64_t i = 0; i < batch; i++) b->lens[i] = len;
    return b->lens;
}

/* decode(q, k_cache, v_cache, k, v, cache_seqlens, block_table, softmax_scale,
 *        causal, window_size, num_splits, want_lse): flash_attn_with_kvcache
 * without rotary, cache_batch_idx, cache_leftpad, packed queries, score
 * modifiers or a quantised cache (the caller leaves those calls to the
 * Python path); float caches, contiguous or paged, with or without rows to
 * append; cache_seqlens None, an int, or an int32/int64 (batch,) tensor. */
static PyObject *fast_decode(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *q, *kc, *vc, *k, *v, *lens, *table, *scale, *causal, *window, *splits;
    int want_lse;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOp", &q, &kc, &vc, &k, &v, &lens, &table, &scale, &causal,
                          &window, &splits, &want_lse))
        return NULL;
    if (!tensor_type) {
        PyErr_SetString(PyExc_RuntimeError, "flashattn._fast: register_torch() first");
        return NULL;
    }
    if (!lib_decode || (k == Py_None) != (v == Py_None)) Py_RETURN_NONE;
    view4 in[5];
    PyObject *const tensors[5] = {q, kc, vc, k, v};
    const int n = k == Py_None ? 3 : 5;
    for (int i = 0; i < n; i++) {
        const int r = view_of(tensors[i], &in[i]);
        if (r < 0) return NULL;
        if (r > 0) Py_RETURN_NONE;
    }
    const int64_t b = in[0].shape[0], sq = in[0].shape[1], h = in[0].shape[2], dv = in[2].shape[3];
    if (b < 0 || sq < 0 || h < 0 || dv < 0) Py_RETURN_NONE;

    flashattn_kv_cache cache;
    lib_cache_init(&cache, sizeof cache);
    cache.k = descriptor(&in[1]), cache.v = descriptor(&in[2]);
    int64_t capacity = in[1].shape[1], shape[2];
    int r;
    if (table != Py_None) {
        const void *at;
        if ((r = index_of(table, 2, shape, &at, NULL))) return r < 0 ? NULL : (Py_INCREF(Py_None), Py_None);
        if (shape[0] != b) Py_RETURN_NONE; /* the Python path's message */
        cache.block_table = (const int32_t *)at, cache.max_pages_per_seq = shape[1];
        capacity *= shape[1];
    }
    if (lens == Py_None || PyLong_CheckExact(lens)) {
        int64_t len = capacity;
        if (lens != Py_None && (r = exact_int64(lens, &len))) return r < 0 ? NULL : (Py_INCREF(Py_None), Py_None);
        if (!(cache.seqlens_i64 = same_lengths(b, len))) return NULL;
    } else {
        const void *at;
        int i64 = 0;
        if ((r = index_of(lens, 1, shape, &at, &i64))) return r < 0 ? NULL : (Py_INCREF(Py_None), Py_None);
        if (shape[0] != b) Py_RETURN_NONE; /* the Python path's message */
        if (i64) cache.seqlens_i64 = (const int64_t *)at;
        else cache.seqlens_i32 = (const int32_t *)at;
    }
    flashattn_params params;
    if ((r = params_of(scale, causal, window, Py_False, splits, &params)))
        return r < 0 ? NULL : (Py_INCREF(Py_None), Py_None);

    /* out (batch, seqlen_q, heads, head_dim_v) in q's dtype, contiguous */
    PyObject *sizes = Py_BuildValue("(LLLL)", (long long)b, (long long)sq, (long long)h, (long long)dv);
    PyObject *dt = sizes ? PyObject_GetAttr(q, s_dtype) : NULL;
    PyObject *kw = dt ? Py_BuildValue("{s:O}", "dtype", dt) : NULL;
    PyObject *out = kw ? PyObject_Call(empty, sizes, kw) : NULL;
    Py_XDECREF(sizes);
    Py_XDECREF(dt);
    Py_XDECREF(kw);
    if (!out) return NULL;
    view4 o = in[0];
    o.shape[3] = dv;
    o.stride[0] = sq * h * dv, o.stride[1] = h * dv, o.stride[2] = dv, o.stride[3] = 1;
    o.data = address_of(out);
    PyObject *lse = NULL;
    float *lse_at = NULL;
    if (!PyErr_Occurred() && want_lse) lse = new_lse(b, h, sq, &lse_at);
    if (PyErr_Occurred()) {
        Py_DECREF(out);
        Py_XDECREF(lse);
        return NULL;
    }

    const flashattn_tensor tq = descriptor(&in[0]), to = descriptor(&o);
    flashattn_tensor tk, tv;
    if (n == 5) tk = descriptor(&in[3]), tv = descriptor(&in[4]);
    const lib_call c = {&tq, n == 5 ? &tk : NULL, n == 5 ? &tv : NULL, &to, &cache, lse_at, &params, NULL};
    return call_and_return(&c, out, lse);
}

/* init(fwd, fwd_workspace_size, params_init_size, decode, decode_workspace_size,
 *      kv_cache_init_size): the functions' addresses; the last three 0 or
 *      None in a library without decode. */
static PyObject *fast_init(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[6];
    if (!PyArg_ParseTuple(args, "OOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5])) return NULL;
    void *a[6];
    for (int i = 0; i < 6; i++) a[i] = o[i] == Py_None ? NULL : PyLong_AsVoidPtr(o[i]);
    if (PyErr_Occurred()) return NULL;
    if (!a[0] || !a[1] || !a[2] || (!a[3] + !a[4] + !a[5]) % 3) {
        PyErr_SetString(PyExc_ValueError, "flashattn._fast.init: null function address");
        return NULL;
    }
    /* a data pointer to a function pointer: what dlsym gives, POSIX allows */
    memcpy(&lib_fwd, &a[0], sizeof a[0]);
    memcpy(&lib_fwd_size, &a[1], sizeof a[1]);
    memcpy(&lib_params_init, &a[2], sizeof a[2]);
    memcpy(&lib_decode, &a[3], sizeof a[3]);
    memcpy(&lib_decode_size, &a[4], sizeof a[4]);
    memcpy(&lib_cache_init, &a[5], sizeof a[5]);
    Py_RETURN_NONE;
}

/* init_bwd(bwd, bwd_workspace_size): the backward's addresses. */
static PyObject *fast_init_bwd(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[2];
    if (!PyArg_ParseTuple(args, "OO", &o[0], &o[1])) return NULL;
    void *a[2];
    for (int i = 0; i < 2; i++) a[i] = o[i] == Py_None ? NULL : PyLong_AsVoidPtr(o[i]);
    if (PyErr_Occurred()) return NULL;
    if (!a[0] != !a[1]) {
        PyErr_SetString(PyExc_ValueError, "flashattn._fast.init_bwd: one null function address");
        return NULL;
    }
    memcpy(&lib_bwd, &a[0], sizeof a[0]);
    memcpy(&lib_bwd_size, &a[1], sizeof a[1]);
    Py_RETURN_NONE;
}

/* register_torch(Tensor, ((dtype, code), x3), float32, int32, int64, empty_like,
 *                empty, contiguous_format, is_grad_enabled, get_num_threads) */
static PyObject *fast_register_torch(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *type, *pairs, *f32, *i32, *i64, *like, *emp, *fmt, *grad, *threads;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOO", &type, &pairs, &f32, &i32, &i64, &like, &emp, &fmt, &grad,
                          &threads))
        return NULL;
    if (!PyTuple_Check(pairs) || PyTuple_Size(pairs) != DTYPES) {
        PyErr_SetString(PyExc_ValueError, "flashattn._fast.register_torch: three (dtype, code) pairs");
        return NULL;
    }
    PyObject *new_dtypes[DTYPES];
    int new_codes[DTYPES];
    for (int i = 0; i < DTYPES; i++) {
        PyObject *pair = PyTuple_GetItem(pairs, i);
        if (!pair || !PyArg_ParseTuple(pair, "Oi", &new_dtypes[i], &new_codes[i])) return NULL;
    }
    PyObject *lse_kw = Py_BuildValue("{s:O}", "dtype", f32);
    PyObject *like_kw = Py_BuildValue("{s:O}", "memory_format", fmt);
    if (!lse_kw || !like_kw) {
        Py_XDECREF(lse_kw);
        Py_XDECREF(like_kw);
        return NULL;
    }
    /* every reference held for the module's life (replaced on a second call) */
    Py_XDECREF(tensor_type);
    Py_XDECREF(empty_like);
    Py_XDECREF(empty);
    Py_XDECREF(lse_dtype_kw);
    Py_XDECREF(empty_like_kw);
    for (int i = 0; i < DTYPES; i++) {
        Py_XDECREF(dtypes[i]);
        Py_INCREF(new_dtypes[i]);
        dtypes[i] = new_dtypes[i], dtype_codes[i] = new_codes[i];
    }
    Py_XDECREF(grad_enabled);
    Py_XDECREF(num_threads);
    Py_XDECREF(int32_dtype);
    Py_XDECREF(int64_dtype);
    Py_INCREF(type), Py_INCREF(like), Py_INCREF(emp), Py_INCREF(args), Py_INCREF(grad), Py_INCREF(threads);
    Py_INCREF(i32), Py_INCREF(i64);
    Py_XDECREF(registration);
    tensor_type = type, empty_like = like, empty = emp, registration = args;
    grad_enabled = grad, num_threads = threads, int32_dtype = i32, int64_dtype = i64;
    lse_dtype_kw = lse_kw, empty_like_kw = like_kw;
    Py_RETURN_NONE;
}

/* registered(): register_torch's last arguments, or None. */
static PyObject *fast_registered(PyObject *self, PyObject *args) {
    (void)self, (void)args;
    if (!registration) Py_RETURN_NONE;
    Py_INCREF(registration);
    return registration;
}

/* release(): this thread's workspace and scratch freed. */
static PyObject *fast_release(PyObject *self, PyObject *args) {
    (void)self, (void)args;
    if (bufs) bufs_empty(bufs);
    Py_RETURN_NONE;
}

/* workspace_bytes(): the size of this thread's workspaces (0: none yet). */
static PyObject *fast_workspace_bytes(PyObject *self, PyObject *args) {
    (void)self, (void)args;
    return PyLong_FromSize_t(bufs ? bufs->ws_bytes[WS_FWD] + bufs->ws_bytes[WS_BWD] : 0);
}

/* live_buffers(): how many threads hold a set of buffers now. */
static PyObject *fast_live_buffers(PyObject *self, PyObject *args) {
    (void)self, (void)args;
    return PyLong_FromLong(atomic_load(&live_bufs));
}

static PyMethodDef methods[] = {
    {"fwd", fast_fwd, METH_VARARGS,
     "fwd(q, k, v, softmax_scale, causal, window_size, deterministic, want_lse)"},
    {"decode", fast_decode, METH_VARARGS,
     "decode(q, k_cache, v_cache, k, v, cache_seqlens, block_table, softmax_scale, causal, "
     "window_size, num_splits, want_lse)"},
    {"bwd", fast_bwd, METH_VARARGS,
     "bwd(q, k, v, out, dout, dq, dk, dv, lse_address, softmax_scale, causal, window_size, "
     "deterministic)"},
    {"init_bwd", fast_init_bwd, METH_VARARGS, "init_bwd(bwd, bwd_workspace_size): addresses"},
    {"init", fast_init, METH_VARARGS,
     "init(fwd, fwd_workspace_size, params_init_size, decode, decode_workspace_size, "
     "kv_cache_init_size): addresses"},
    {"register_torch", fast_register_torch, METH_VARARGS,
     "register_torch(Tensor, dtype_code_pairs, float32, int32, int64, empty_like, empty, "
     "contiguous_format, is_grad_enabled, get_num_threads)"},
    {"registered", fast_registered, METH_NOARGS, "register_torch's last arguments, or None"},
    {"release", fast_release, METH_NOARGS, "free this thread's workspace and LSE scratch"},
    {"workspace_bytes", fast_workspace_bytes, METH_NOARGS, "this thread's workspace size"},
    {"live_buffers", fast_live_buffers, METH_NOARGS, "how many threads hold buffers"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fast", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__fast(void) {
    static int keyed; /* once, should the module be initialised again */
    if (!keyed && pthread_key_create(&bufs_key, bufs_free)) return PyErr_NoMemory();
    keyed = 1;
    s_shape = PyUnicode_InternFromString("shape");
    s_stride = PyUnicode_InternFromString("stride");
    s_data_ptr = PyUnicode_InternFromString("data_ptr");
    s_dtype = PyUnicode_InternFromString("dtype");
    s_is_cpu = PyUnicode_InternFromString("is_cpu");
    s_is_contiguous = PyUnicode_InternFromString("is_contiguous");
    s_requires_grad = PyUnicode_InternFromString("requires_grad");
    if (!s_shape || !s_stride || !s_data_ptr || !s_dtype || !s_is_cpu || !s_is_contiguous ||
        !s_requires_grad)
        return NULL;
    return PyModule_Create(&module);
}
