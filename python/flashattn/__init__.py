"""flashattn: exact FlashAttention on CPUs.

NumPy: attention, attention_backward, attention_varlen, attention_varlen_backward,
attention_with_kvcache (float, int8 and fp8 caches), quantize_kv_cache, merge;
unpad_input and pad_input (flashattn.padding, NumPy arrays or torch tensors).
PyTorch (optional): flash_attn_func and its siblings, with FlashAttention-2's
names, arguments and layouts, and scaled_dot_product_attention, a drop-in for
torch.nn.functional's on CPU tensors; they are imported from
flashattn.flash_attn_interface and flashattn.sdpa on first use, so this
package imports without torch.
"""

from ._lib import (BadArgumentError, Error, LibraryError, OutOfMemoryError,
                   UnsupportedError, lib as _clib)
from ._lib import release_workspace
from .numpy_api import (attention, attention_backward, attention_varlen,
                        attention_varlen_backward, attention_with_kvcache, merge,
                        quantize_kv_cache)
from .padding import pad_input, unpad_input

_TORCH_NAMES = (
    "flash_attn_func",
    "flash_attn_qkvpacked_func",
    "flash_attn_kvpacked_func",
    "flash_attn_varlen_func",
    "flash_attn_varlen_kvpacked_func",
    "flash_attn_varlen_qkvpacked_func",
    "flash_attn_with_kvcache",
)

__version__ = _clib.flashattn_version().decode()


def isa():
    """The kernel path the library runs on: "scalar", "avx2", "avx512",
    "avx512bf16", "amx", or on 64-bit Arm "neon" or "sve"
    (FLASHATTN_ISA=scalar|avx2|avx512|avx512bf16|amx|neon|sve in the
    environment forces one; avx512bf16 and sve are only used when forced;
    the names are those of src/kernels/isa_list.h)."""
    return _clib.flashattn_isa().decode()


def __getattr__(name):
    if name in _TORCH_NAMES:
        from . import flash_attn_interface
        # bound here once: later look-ups skip this hook (microseconds per call)
        for n in _TORCH_NAMES:
            globals()[n] = getattr(flash_attn_interface, n)
        return globals()[name]
    if name == "scaled_dot_product_attention":
        from .sdpa import scaled_dot_product_attention
        globals()[name] = scaled_dot_product_attention
        return scaled_dot_product_attention
    raise AttributeError("module 'flashattn' has no attribute %r" % name)


def __dir__():
    """The module's names and the torch functions __getattr__ provides
    (listed without importing torch)."""
    return sorted(set(globals()) | set(_TORCH_NAMES) | {"scaled_dot_product_attention"})


__all__ = ["attention", "attention_backward", "attention_varlen", "attention_varlen_backward",
           "attention_with_kvcache", "merge", "unpad_input", "pad_input", "isa",
           "release_workspace", "Error",
           "BadArgumentError", "OutOfMemoryError", "UnsupportedError", "LibraryError"]
