"""xlnet_tf.benchmarks.quantized_speed (run/quantized_speed.py): every path a user takes after
quantize("int8"), and ONNX Runtime's int8, timed in turns, each with its error against float32
under XLA."""

import pytest

from xlnet_tf.benchmarks import quantized_speed


@pytest.mark.slow
def test_every_row_is_timed_and_near_the_float_model():
  rows = quantized_speed.measure("tiny", batch=2, seq_len=16, rounds=2, calls=1)
  assert list(rows) == ["float32, XLA", "bfloat16, no XLA", "int8, predict", "int8, tf.function",
                        "int8, tf.function XLA", "int8, SavedModel", "int8, SavedModel --xla",
                        "ONNX Runtime int8"]
  assert all(len(row["seconds"]) == 2 and min(row["seconds"]) > 0 for row in rows.values())
  assert rows["float32, XLA"]["relative_error"] == 0.0
  # bfloat16 and int8 move the output, but not far (a wrong path gives errors near 1).
  for name in list(rows)[1:]:
    assert 1e-5 < rows[name]["relative_error"] < 0.05, (name, rows[name])
  # The int8 paths of this project compute the same numbers (each within float rounding).
  own = [rows[name]["relative_error"] for name in list(rows)[2:7]]
  assert max(own) - min(own) < 1e-3
  table = quantized_speed.markdown(rows, tokens=32).splitlines()
  assert len(table) == 10 and table[2].startswith("| float32, XLA |")
  assert table[0].endswith("| vs ONNX Runtime int8 | relative error |")
  assert table[2].endswith(" | 0.00% |") and "| 1.00x |" in table[2]
  assert table[-1].startswith("| ONNX Runtime int8 |") and "| 1.00x |" in table[-1]
