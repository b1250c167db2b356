"""Canonical dtype names and sizes, mapping torch / Kineto spellings ("c10::BFloat16", "long int"...)."""
from __future__ import annotations

from functools import lru_cache

__all__ = ["normalize_dtype", "dtype_size_bytes", "CANONICAL_DTYPES"]

#: canonical dtype -> element size in bytes (sub-byte formats round up to 1)
_SIZES: dict[str, int] = {
    "bfloat16": 2, "float16": 2, "float32": 4, "tf32": 4, "float64": 8,
    "fp8": 1, "mxfp8": 1, "mxfp4": 1, "fp4": 1,
    "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8,
    "bool": 1, "complex32": 4, "complex64": 8, "complex128": 16,
}
CANONICAL_DTYPES: tuple[str, ...] = tuple(_SIZES)

# lower-cased, prefix-stripped spelling -> canonical name
_ALIASES: dict[str, str] = {
    "float": "float32", "float32": "float32", "fp32": "float32", "f32": "float32", "single": "float32",
    "double": "float64", "float64": "float64", "fp64": "float64", "f64": "float64",
    "half": "float16", "float16": "float16", "fp16": "float16", "f16": "float16",
    "bfloat16": "bfloat16", "bf16": "bfloat16",
    "tf32": "tf32", "tensorfloat32": "tf32",
    "fp8": "fp8", "float8": "fp8", "float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "float8_e4m3fnuz": "fp8",
    "float8_e5m2fnuz": "fp8", "float8_e8m0fnu": "fp8", "cfp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8",
    "mxfp8": "mxfp8", "mxfp4": "mxfp4", "fp4": "fp4", "float4_e2m1fn_x2": "fp4",
    "int8": "int8", "signed char": "int8", "char": "int8", "qint8": "int8",
    "uint8": "uint8", "unsigned char": "uint8", "byte": "uint8", "quint8": "uint8",
    "int16": "int16", "short": "int16", "short int": "int16",
    "uint16": "uint16", "unsigned short": "uint16",
    "int32": "int32", "int": "int32", "qint32": "int32",
    "uint32": "uint32", "unsigned int": "uint32",
    "int64": "int64", "long": "int64", "long int": "int64", "long long": "int64", "long long int": "int64",
    "uint64": "uint64", "unsigned long": "uint64", "unsigned long int": "uint64",
    "bool": "bool", "boolean": "bool",
    "complex<half>": "complex32", "complexhalf": "complex32", "complex32": "complex32",
    "complex<float>": "complex64", "complexfloat": "complex64", "complex64": "complex64", "cfloat": "complex64",
    "complex<double>": "complex128", "complexdouble": "complex128", "complex128": "complex128", "cdouble": "complex128",
}


@lru_cache(maxsize=4096)
def normalize_dtype(s: object) -> str:
    """Canonical dtype name for a torch / Kineto / Neuron spelling.

    "float" / "fp32" / "torch.float32" -> "float32"; "c10::BFloat16" / "BFloat16" -> "bfloat16";
    "Half" / "c10::Half" -> "float16"; "long int" -> "int64"; "int" -> "int32"; "unsigned char" -> "uint8";
    "c10::Float8_e4m3fn" -> "fp8". Returns "" for empty, non-tensor ("Scalar", "TensorList") or unknown
    spellings (callers treat "" as unknown)."""
    if not isinstance(s, str):
        s = "" if s is None else str(s)
    key = s.strip().lower()
    for prefix in ("torch.", "c10::", "at::", "nl."):
        if key.startswith(prefix):
            key = key[len(prefix):]
    key = key.replace("c10::", "")
    return _ALIASES.get(key, "")


def dtype_size_bytes(dtype: str) -> int:
    """Element size in bytes of a dtype (any spelling ``normalize_dtype`` accepts); 0 when unknown."""
    return _SIZES.get(dtype) or _SIZES.get(normalize_dtype(dtype), 0)
