"""Numba kernels as XLA custom calls on the CPU, through JAX's typed foreign function interface.

``jax.pure_callback`` re-enters Python on every call: it takes the GIL, wraps every argument and
copies every result into a new XLA buffer (3–5 ms per call for the aspect model's statistics
on 20 Newsgroups at K = 64, a quarter of the E-step before these handlers). A handler registered with
``jax.ffi.register_ffi_target`` is plain machine code that XLA calls with pointers to its own
buffers: the kernel reads the inputs in place and writes the results where XLA wants them, and
no Python runs. Several devices can call it at once (data-parallel EM on host devices).

A handler is a ``numba.cfunc`` of type ``int64(int64)``: it receives the address of an
``XLA_FFI_CallFrame`` and returns the address of an ``XLA_FFI_Error`` (0 for success). This
module reads call frames by the C layout of ``xla/ffi/api/c_api.h`` (API version 0.x, a stable
ABI: every struct starts with its ``struct_size``, which the handler checks before reading on). The byte offsets read::

    XLA_FFI_CallFrame  struct_size 0, extension_start 8, api 16, ctx 24, stage 32,
                       args {struct_size 40, extension 48, size 56, types 64, args 72},
                       rets {struct_size 80, extension 88, size 96, types 104, rets 112},
                       attrs 120..168                       (STRUCT_SIZE 168; a future pointer follows)
    XLA_FFI_Buffer     struct_size 0, extension_start 8, dtype 16, data 24, rank 32, dims 40    (48)
    XLA_FFI_Api        struct_size 0, extension_start 8, api_version {16: size, 24: ext,
                       32: major, 36: minor}, internal_api 40, XLA_FFI_Error_Create 48
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any, Callable

import numpy as np
from llvmlite import ir
from numba import carray, cfunc, njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from inference.native.numba_cache import lock_cache_saves

# Every kernel module imports this one before it defines a cached function: from here on, numba's
# cache saves are exclusive across processes (see inference.native.numba_cache for the race).
lock_cache_saves()

__all__ = [
    "register_handler", "prologue", "frame_stage", "frame_error", "answer_metadata", "arg_buffer", "ret_buffer",
    "buffer_1d", "buffer_2d", "buffer_3d", "buffer_flat", "buffer_shape", "buffer_scalar", "batch_layout", "batch_element",
    "write_element", "batched_arg", "batched_scalars", "batched_vectors", "batched_matrices", "every_element",
    "float64_arg", "float64_matrix", "float64_bits", "write_result", "EXECUTE", "I32", "I64",
]

I32 = np.int32(0)
I64 = np.int64(0)
EXECUTE = 3  # XLA_FFI_ExecutionStage_EXECUTE
_METADATA_EXTENSION = 1
_CALL_FRAME_SIZE = 168  # XLA_FFI_CallFrame_STRUCT_SIZE: up to attrs
_BUFFER_SIZE = 48
_ERROR_INTERNAL = 13
_LAYOUT_MESSAGE = ("latentzoo: the XLA FFI call frame does not have the layout this numba kernel was written "
                   "for (xla/ffi/api/c_api.h 0.x); fit with backend='xla'")


# ---------------------------------------------------------------------------- raw memory access
@intrinsic
def _load(typingctx, address, example):
    """The value of ``example``'s type stored at the integer ``address``."""
    def codegen(context, builder, signature, args):
        pointer = builder.inttoptr(args[0], context.get_value_type(signature.return_type).as_pointer())
        return builder.load(pointer)

    return example(address, example), codegen


@intrinsic
def _store(typingctx, address, value):
    """Store ``value`` (of its own type) at the integer ``address``."""
    def codegen(context, builder, signature, args):
        pointer = builder.inttoptr(args[0], context.get_value_type(signature.args[1]).as_pointer())
        builder.store(args[1], pointer)
        return context.get_dummy_value()

    return types.void(address, value), codegen


@intrinsic
def _as_pointer(typingctx, address, example):
    """The integer ``address`` as a pointer to ``example``'s type (for ``numba.carray``)."""
    pointer_type = types.CPointer(example)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(pointer_type))

    return pointer_type(address, example), codegen


@intrinsic
def _create_layout_error(typingctx, api):
    """Call ``api->XLA_FFI_Error_Create`` with ``_LAYOUT_MESSAGE``; returns the error's address."""
    def codegen(context, builder, signature, args):
        i8_pointer, i32, i64 = ir.IntType(8).as_pointer(), ir.IntType(32), ir.IntType(64)
        create_args_type = ir.LiteralStructType([i64, i8_pointer, i8_pointer, i32])
        create_args = cgutils.alloca_once(builder, create_args_type)
        zero = ir.Constant(i32, 0)
        fields = (ir.Constant(i64, 28), ir.Constant(i8_pointer, None),
                  context.insert_const_string(builder.module, _LAYOUT_MESSAGE), ir.Constant(i32, _ERROR_INTERNAL))
        for index, value in enumerate(fields):
            builder.store(value, builder.gep(create_args, [zero, ir.Constant(i32, index)]))
        function_type = ir.FunctionType(i8_pointer, [create_args_type.as_pointer()])
        address = builder.load(builder.inttoptr(builder.add(args[0], ir.Constant(i64, 48)), i64.as_pointer()))
        error = builder.call(builder.inttoptr(address, function_type.as_pointer()), [create_args])
        return builder.ptrtoint(error, i64)

    return types.int64(api), codegen


# ---------------------------------------------------------------------------- call frames
@njit(inline="always")
def answer_metadata(frame):
    """If XLA is asking for the handler's metadata, answer it and return True.

    XLA calls a handler once with a metadata extension to learn its API version and traits; the
    version is the one the running XLA reports, and there are no traits.
    """
    extension = _load(frame + 8, I64)
    if extension == 0 or _load(extension + 8, I32) != _METADATA_EXTENSION:
        return False
    api = _load(frame + 16, I64)
    metadata = _load(extension + 24, I64)
    _store(metadata + 8, np.int64(24))  # api_version.struct_size
    _store(metadata + 16, np.int64(0))  # api_version.extension_start
    _store(metadata + 24, _load(api + 32, I32))  # major
    _store(metadata + 28, _load(api + 36, I32))  # minor
    _store(metadata + 32, np.uint32(0))  # traits
    return True


@njit(inline="always")
def frame_stage(frame):
    return _load(frame + 32, I32)


@njit(inline="always")
def frame_error(frame, n_args, n_rets):
    """0 if the call frame has the expected layout and counts, else an XLA error to return."""
    ok = (_load(frame, I64) >= _CALL_FRAME_SIZE and _load(frame + 56, I64) == n_args
          and _load(frame + 96, I64) == n_rets)
    if ok:
        for index in range(n_args):
            ok = ok and _load(arg_buffer(frame, index), I64) >= _BUFFER_SIZE
        for index in range(n_rets):
            ok = ok and _load(ret_buffer(frame, index), I64) >= _BUFFER_SIZE
    return 0 if ok else _create_layout_error(_load(frame + 16, I64))


@njit(inline="always")
def prologue(frame, n_args, n_rets):
    """(True, code) when a handler must return ``code`` at once: XLA asked for its metadata
    (answered, 0), called it for a stage other than execution (0), or passed a call frame of
    another layout or argument count (an XLA error); (False, 0) when it should run its kernel."""
    if answer_metadata(frame) or frame_stage(frame) != EXECUTE:
        return True, np.int64(0)
    error = frame_error(frame, n_args, n_rets)
    return error != 0, error


@njit(inline="always")
def arg_buffer(frame, index):
    return _load(_load(frame + 72, I64) + 8 * index, I64)


@njit(inline="always")
def ret_buffer(frame, index):
    return _load(_load(frame + 112, I64) + 8 * index, I64)


@njit(inline="always")
def buffer_1d(buffer, example):
    dims = _load(buffer + 40, I64)
    return carray(_as_pointer(_load(buffer + 24, I64), example), (_load(dims, I64),))


@njit(inline="always")
def buffer_2d(buffer, example):
    dims = _load(buffer + 40, I64)
    return carray(_as_pointer(_load(buffer + 24, I64), example), (_load(dims, I64), _load(dims + 8, I64)))


@njit(inline="always")
def buffer_3d(buffer, example):
    dims = _load(buffer + 40, I64)
    shape = (_load(dims, I64), _load(dims + 8, I64), _load(dims + 16, I64))
    return carray(_as_pointer(_load(buffer + 24, I64), example), shape)


@njit(inline="always")
def buffer_shape(buffer):
    """The dimensions of a buffer of any rank, as an int64 array."""
    dims = _load(buffer + 40, I64)
    shape = np.empty(_load(buffer + 32, I64), np.int64)
    for axis in range(shape.shape[0]):
        shape[axis] = _load(dims + 8 * axis, I64)
    return shape


@njit(inline="always")
def buffer_flat(buffer, example):
    """A buffer of any rank as a 1-D array of its elements (row-major)."""
    size = 1
    for extent in buffer_shape(buffer):
        size *= extent
    return carray(_as_pointer(_load(buffer + 24, I64), example), (size,))


@njit(inline="always")
def buffer_scalar(buffer, example):
    return _load(_load(buffer + 24, I64), example)


@njit(inline="always")
def batch_layout(frame, n_trailing):
    """(shape, n_lead, n_elements) of a call batched by ``vmap_method="expand_dims"``, read off
    result 0, which has the whole batch shape and ``n_trailing`` axes of its own."""
    shape = buffer_shape(ret_buffer(frame, 0))
    n_lead = shape.shape[0] - n_trailing
    n_elements = 1
    for axis in range(n_lead):
        n_elements *= shape[axis]
    return shape, n_lead, n_elements


@njit(inline="always")
def batch_element(frame, index, batch_shape, n_lead, element, example):
    """Element ``element`` (row-major over ``batch_shape[:n_lead]``) of argument ``index`` of a call
    batched by ``vmap_method="expand_dims"``, as a flat array, and the argument's trailing shape.

    Under that method every argument has the ``n_lead`` leading axes; one of size 1 is shared
    along that axis, so the element's offset skips it.
    """
    buffer = arg_buffer(frame, index)
    shape = buffer_shape(buffer)
    flat = buffer_flat(buffer, example)
    inner = 1
    for axis in range(n_lead, shape.shape[0]):
        inner *= shape[axis]
    offset, remaining, stride = 0, element, 1
    for axis in range(n_lead - 1, -1, -1):
        position = remaining % batch_shape[axis]
        remaining //= batch_shape[axis]
        if shape[axis] > 1:
            offset += position * stride
        stride *= shape[axis]
    return flat[offset * inner: (offset + 1) * inner], shape[n_lead:]


@njit(inline="always")
def write_element(out, element, values):
    """Write the 1-D ``values`` as element ``element`` of the flat result ``out`` (casting).

    An explicit loop: assigning through a loop variable over a tuple of arrays did not reach
    XLA's buffers in a handler.
    """
    size = values.shape[0]
    for index in range(size):
        out[element * size + index] = values[index]


@njit(nogil=True, cache=True)
def batched_arg(frame, index, batch_shape, n_lead, n_batch, example):
    """Argument ``index`` of a call batched by ``vmap_method="expand_dims"`` as a 2-D array (rows,
    elements per row) and its trailing shape. Rows: 1 when every batch element shares the argument,
    else ``n_batch``, one per element (row-major over the batch axes), which is what the chain
    kernels' ``batch_row`` reads. A view of XLA's buffer, except for an argument batched along
    some of the batch axes only (nested ``vmap`` calls), which is copied into one row per element."""
    buffer = arg_buffer(frame, index)
    shape = buffer_shape(buffer)
    flat = buffer_flat(buffer, example)
    lead, inner, whole = 1, 1, True
    for axis in range(n_lead):
        lead *= shape[axis]
        whole = whole and shape[axis] == batch_shape[axis]
    for axis in range(n_lead, shape.shape[0]):
        inner *= shape[axis]
    if lead == 1 or whole:
        return flat.reshape((lead, inner)), shape[n_lead:]
    rows = np.empty((n_batch, inner), flat.dtype)
    for element in range(n_batch):
        rows[element] = batch_element(frame, index, batch_shape, n_lead, element, example)[0]
    return rows, shape[n_lead:]


@njit(nogil=True, cache=True)
def batched_scalars(frame, index, batch_shape, n_lead, n_batch, example):
    """:func:`batched_arg` of a per-element scalar: shape (rows,)."""
    return batched_arg(frame, index, batch_shape, n_lead, n_batch, example)[0][:, 0]


@njit(nogil=True, cache=True)
def batched_vectors(frame, index, batch_shape, n_lead, n_batch, example):
    """:func:`batched_arg` of a per-element vector: shape (rows, n)."""
    return batched_arg(frame, index, batch_shape, n_lead, n_batch, example)[0]


@njit(nogil=True, cache=True)
def batched_matrices(frame, index, batch_shape, n_lead, n_batch, example):
    """:func:`batched_arg` of a per-element matrix: shape (rows, n, m)."""
    rows, tail = batched_arg(frame, index, batch_shape, n_lead, n_batch, example)
    return rows.reshape((rows.shape[0], tail[0], tail[1]))


@njit(nogil=True, cache=True)
def every_element(rows, n_batch):
    """The rows of :func:`batched_arg` with one row per batch element: themselves, or the shared
    row copied ``n_batch`` times (for kernels that index every argument by chain)."""
    if rows.shape[0] == n_batch:
        return rows
    copies = np.empty((n_batch, rows.shape[1]), rows.dtype)
    for element in range(n_batch):
        copies[element] = rows[0]
    return copies


@njit(nogil=True, cache=True)
def float64_arg(frame, index):
    """Argument ``index``, float64 values passed as the int32 pairs of :func:`float64_bits`, as a
    flat float64 array (any leading axes of size 1 that a ``vmap`` added are skipped)."""
    buffer = arg_buffer(frame, index)
    size = 1
    for extent in buffer_shape(buffer):
        size *= extent
    return carray(_as_pointer(_load(buffer + 24, I64), np.float64(0)), (size // 2,))


@njit(nogil=True, cache=True)
def float64_matrix(frame, index, n_lead):
    """Argument ``index``, a float64 matrix passed as :func:`float64_bits`, as a 2-D float64 array."""
    shape = buffer_shape(arg_buffer(frame, index))
    return float64_arg(frame, index).reshape((shape[n_lead], shape[n_lead + 1]))


def float64_bits(value: Any) -> np.ndarray:
    """``value`` in float64, its bits as int32 pairs (a trailing axis of 2): how a host constant
    reaches a kernel with every bit of its float64 value when JAX computes in float32 (read back
    with :func:`float64_arg`)."""
    array = np.ascontiguousarray(np.asarray(value, np.float64))
    return array.view(np.int32).reshape(array.shape + (2,))


@njit(nogil=True, cache=True)
def write_result(frame, index, values, example):
    """Copy the C-ordered ``values`` (the whole batch) into result ``index``, cast to ``example``'s type."""
    write_element(buffer_flat(ret_buffer(frame, index), example), 0, values.ravel())


# ---------------------------------------------------------------------------- registration
_registered: dict[str, Any] = {}
_registering = threading.Lock()


def register_handler(name: str, handler: Callable) -> str:
    """Compile ``handler(frame_address) -> error_address`` as a cfunc and register it for the CPU.

    Idempotent and thread-safe; the compiled function is kept alive for the life of the process
    (XLA holds its address). ``handler`` must be a module-level function so numba's disk cache
    can find it.
    """
    with _registering:
        if name not in _registered:
            import jax
            import numba

            numba.get_num_threads()  # starts numba's thread pool, which the kernels' parallel loops use
            compiled = cfunc(types.int64(types.int64), cache=True)(handler)
            address = ctypes.cast(compiled.address, ctypes.c_void_p)
            jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(address), platform="cpu")
            _registered[name] = compiled
    return name
