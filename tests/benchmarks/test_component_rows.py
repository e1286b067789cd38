"""xlnet_tf.benchmarks.component_rows' product-rate row: the kernels a decoding step's products
read, timed on the path the steps take (float32 under XLA; int8 through oneDNN's constant
kernels where TensorFlow has them)."""

import pytest
import tensorflow as tf

from xlnet_tf.benchmarks import component_rows
from xlnet_tf.modeling.ops.int8_packing import onednn_available


@pytest.mark.parametrize("int8, rows", [(False, 4), (False, 8), (True, 4)])
def test_the_product_rate_counts_every_kernel_byte_once_a_call(int8, rows, monkeypatch):
  traced = []
  original = tf.function
  monkeypatch.setattr(component_rows.tf, "function",
                      lambda *args, **kwargs: traced.append(original(*args, **kwargs))
                      or traced[-1])
  result = component_rows.measure_products({"size": "tiny", "rows": rows, "int8": int8,
                                            "repeats": 2})
  d_model, d_inner, pairs = 32, 64, component_rows._PRODUCT_PAIRS
  weights = 2 * pairs * d_model * d_inner
  # int8: a byte a weight and a float32 scale per output column; float32: 4 bytes a weight
  scales = pairs * (d_inner + d_model)
  assert result["kernel_bytes"] == (weights + 4 * scales if int8 else 4 * weights)
  assert result["gbs"] == pytest.approx(result["kernel_bytes"] / result["seconds"] / 1e9)
  assert len(result["call_seconds"]) == 2 and result["seconds"] > 0
  (chain,) = [f for f in traced if f.python_function.__name__ == "chain"]  # the timed one
  graph = chain.get_concrete_function(tf.TensorSpec([rows, d_model])).graph
  op_types = {op.type for op in graph.get_operations()}
  if int8 and onednn_available():  # the int8 steps' product, on constant kernels
    assert "QuantizedMatMulWithBias" in op_types and "ReadVariableOp" not in op_types
  elif not int8:  # as the float32 steps: XLA, the kernels transposed from 8 rows
    products = [op for op in graph.get_operations() if op.type == "MatMul"]
    assert len(products) == 2 * pairs and chain._jit_compile  # noqa: SLF001
    assert {op.get_attr("transpose_b") for op in products} == {rows >= 8}
