"""What this machine's CPU can multiply in integers (no TensorFlow here).

oneDNN's u8 x s8 product sums each pair of byte products in int32 where the CPU has a VNNI
instruction (AVX-512 VNNI, AVX-VNNI, AMX), and in int16 with saturation where it has not
(AVX2's vpmaddubsw): there 255 x 127 + 255 x 127 does not fit, and the product comes out wrong
without an error (measured on an AVX2 EPYC: 5% of a product's sums off for activations around
128). `exact_u8_pairs` says which.
"""

import functools
import os
import platform

# TensorFlow's switch for oneDNN, read once, when TensorFlow loads.
ONEDNN_SWITCH = "TF_ENABLE_ONEDNN_OPTS"

# /proc/cpuinfo flags of an instruction that sums u8 x s8 products in int32.
_INT32_PAIR_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8"})


@functools.lru_cache(maxsize=None)
def cpu_flags(cpuinfo_path: str = "/proc/cpuinfo") -> frozenset:
  """The first CPU's flags in `cpuinfo_path` (empty where there is none: not Linux)."""
  try:
    with open(cpuinfo_path, encoding="utf-8", errors="replace") as cpuinfo:
      for line in cpuinfo:
        if line.startswith("flags"):
          return frozenset(line.partition(":")[2].split())
  except OSError:
    pass
  return frozenset()


def exact_u8_pairs(flags: frozenset = None) -> bool:
  """Whether oneDNN's u8 x s8 product is exact for any uint8 rows on a CPU with `flags`
  (default this one's): VNNI or AMX; False where it is not known."""
  return bool((cpu_flags() if flags is None else flags) & _INT32_PAIR_FLAGS)


def is_x86() -> bool:
  """Whether this is an x86-64 machine (where TensorFlow's builds carry oneDNN)."""
  return platform.machine().lower() in ("x86_64", "amd64")


def default_onednn_on() -> None:
  """TF_ENABLE_ONEDNN_OPTS=1 unless set, on x86 (xlnet_tf/__init__.py, before TensorFlow
  loads). TensorFlow turns oneDNN on by itself only on CPUs with AVX-512 VNNI / BF16 or AMX; on
  the others (AVX2) it leaves out oneDNN's int8 product, which runs a quantized model's
  products at ~2x its float32 ones there (docs/performance.md, "int8 on a CPU without VNNI")."""
  if is_x86():
    os.environ.setdefault(ONEDNN_SWITCH, "1")


def onednn_switched_off() -> bool:
  """Whether TF_ENABLE_ONEDNN_OPTS=0 was asked for."""
  return os.environ.get(ONEDNN_SWITCH) == "0"
