"""The relative error of one output against another: how the int8 paths (the int8 ONNX
file's check, the benchmark's int8 rows, the tests) measure their distance from float."""

import numpy as np


def relative_error(expected, actual) -> float:
  """||actual - expected|| / ||expected|| (2-norms over every element, float64); NaN in
  `actual` gives NaN."""
  expected = np.asarray(expected, np.float64)
  difference = float(np.linalg.norm(np.asarray(actual, np.float64) - expected))
  scale = float(np.linalg.norm(expected))
  if scale == 0.0:
    return difference if difference == 0.0 or np.isnan(difference) else float("inf")
  return difference / scale
