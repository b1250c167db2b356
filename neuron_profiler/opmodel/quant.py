"""Dtype conversions (torch-free): ``aten::_to_copy`` and FBGEMM's quantize / dequantize ops
(``FloatToFP8RowwiseQuantized``, ``FP8RowwiseQuantizedToFloat``, ``FloatToHFP8Quantized``, ``HFP8QuantizedToFloat``).

Rules (N = elements of the float side):

* ``_to_copy(self, dtype, layout, device, pin_memory, non_blocking, memory_format)``: 0 FLOPs; reads
  ``self``, writes its elements in the target dtype: Concrete Inputs hold ``dtype`` as a ``c10::ScalarType``
  code (``'15'`` = bfloat16; ``''`` = None: ``self``'s dtype). Without Concrete Inputs the written size is
  unknown (a float32 -> bfloat16 cast writes half of what it reads).

* ``FloatToFP8RowwiseQuantized(input[..., C], forward)`` (R rows = elements / C): 2 FLOPs per element (a
  max-compare for the row's scale, a multiply by it); reads the input, writes R rows of ``ceil(C / 4) * 4``
  fp8 bytes plus 2 float32 (the row's scale and bias): R x (ceil(C / 4) * 4 + 8) bytes, fbgemm_gpu's
  ``output_columns = ncols_aligned + 2 * sizeof(float)`` (real traces dequantize [R, 264] for C = 256);
* ``FP8RowwiseQuantizedToFloat(input[..., W] uint8, forward)``: 1 divide (by the row scale) per element of
  the R x (W - 8) output; reads the input, writes R x (W - 8) float32 (this two-argument form has no output
  dtype argument: its output is float32);
* ``FloatToHFP8Quantized`` / ``HFP8QuantizedToFloat``: an elementwise bit-level conversion of each element,
  0 FLOPs like a dtype cast (``aten::_to_copy``); reads and writes N elements (4 bytes on the float side, 1
  on the hfp8 side).
"""
from __future__ import annotations

from .shapes import Tensor
from .traffic import Traffic

__all__ = ["QUANT_OPS", "quant_work"]

QUANT_OPS = ("_to_copy", "FloatToFP8RowwiseQuantized", "FP8RowwiseQuantizedToFloat", "FloatToHFP8Quantized",
             "HFP8QuantizedToFloat")

# element size of c10::ScalarType codes (c10/core/ScalarType.h order)
_SCALAR_TYPE_BYTES = {0: 1, 1: 1, 2: 2, 3: 4, 4: 8, 5: 2, 6: 4, 7: 8, 8: 4, 9: 8, 10: 16, 11: 1, 12: 1, 13: 1, 14: 4,
                      15: 2, 23: 1, 24: 1, 25: 1, 26: 1}


def _to_copy(x: Tensor, concrete: list | None) -> tuple[int, bool, Traffic]:
    if not concrete or len(concrete) < 2:
        return 0, True, Traffic(x.nbytes, 0, False, "_to_copy: target dtype not recorded (no Concrete Inputs)")
    code = str(concrete[1]).strip()
    if code in ("", "None"):
        return 0, True, Traffic(x.nbytes, x.nbytes)
    size = _SCALAR_TYPE_BYTES.get(int(code)) if code.isdigit() else None
    if size is None:
        return 0, True, Traffic(x.nbytes, 0, False, f"_to_copy: unknown target dtype code {code!r}")
    return 0, True, Traffic(x.nbytes, x.numel * size)


def quant_work(base: str, ts: list[Tensor | None], concrete: list | None) -> tuple[int, bool, Traffic]:
    """(FLOPs, FLOPs known, traffic) of one of :data:`QUANT_OPS` from its positional tensor arguments."""
    x = ts[0] if ts else None
    if x is None:
        return 0, False, Traffic(0, 0, False, f"{base}: input shape not recorded")
    if base == "_to_copy":
        return _to_copy(x, concrete)
    if base == "FloatToHFP8Quantized":
        return 0, True, Traffic(x.nbytes, x.numel)
    if base == "HFP8QuantizedToFloat":
        return 0, True, Traffic(x.nbytes, x.numel * 4)
    if not x.shape or len([t for t in ts if t is not None]) != 1 or len(ts) != 2:
        return 0, False, Traffic(0, 0, False, f"{base}: expected one input tensor and the forward flag")
    cols = x.shape[-1]
    rows = x.numel // max(cols, 1)
    if base == "FloatToFP8RowwiseQuantized":
        return 2 * x.numel, True, Traffic(x.nbytes, rows * (-(-cols // 4) * 4 + 8))
    if cols <= 8:
        return 0, False, Traffic(0, 0, False, f"{base}: rows narrower than their 8-byte scale")
    out = rows * (cols - 8)
    return out, True, Traffic(x.nbytes, out * 4)
