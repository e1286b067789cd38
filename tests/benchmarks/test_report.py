"""The benchmark report (xlnet_tf.benchmarks.report) on rows built by hand: rates, model-FLOPs
use, the best of several rounds, the peer and --baseline ratios in the Markdown tables."""

import json

import pytest

from xlnet_tf.benchmarks import report


def row(implementation, seconds, **extra):
  return {"size": "tiny", "batch": 2, "seq_len": 16, "dtype": "float32", "mode": "forward",
          "implementation": implementation, "seconds": seconds, "peak_rss_gb": 1.5, **extra}


def test_rates_and_model_flops_use():
  result = row("xlnet_tf", 0.5)
  report.add_rates(result, {"float32": 100.0})
  assert result["tokens_per_sec"] == pytest.approx(2 * 16 / 0.5)
  flops = report.model_flops("tiny", 2, 16, "forward")
  assert result["mfu"] == pytest.approx(flops / 0.5 / 1e9 / 100.0)
  assert report.model_flops("tiny", 2, 16, "train") > 3 * flops  # + the query stream and logits
  generated = dict(row("xlnet_tf", 2.0), mode="generate", new_tokens=4)
  report.add_rates(generated, {"float32": 100.0})
  assert generated["tokens_per_sec"] == pytest.approx(2 * 4 / 2.0) and "mfu" not in generated


def test_each_row_keeps_its_best_round():
  rounds = [row("xlnet_tf", 0.4, peak_rss_gb=1.0), row("xlnet_tf", 0.3, peak_rss_gb=0.9),
            {"error": "killed"}]
  best = None
  for result in rounds:
    best = report.better_round(best, result)
  assert best["seconds"] == 0.3 and best["round_seconds"] == [0.4, 0.3, None]
  assert best["peak_rss_gb"] == 1.0 and "error" not in best


def test_tables_compare_with_the_fastest_peer_and_the_baseline(tmp_path):
  results = [row("xlnet_tf", 0.25), row("hf_torch", 0.5), row("keras_hub", 1.0),
             row("xlnet_tf", 0.5, revision="abc1234")]
  for result in results:
    report.add_rates(result, {"float32": 100.0})
  output = str(tmp_path / "out" / "bench")
  table = report.write_report(output, results, {"float32": 100.0}, "python run/benchmark.py")
  assert "| tiny | 2x16 | float32 | forward | xlnet_tf | 128.0 | 2.00x |" in table
  assert "| tiny | 2x16 | float32 | forward | 128.0 | 64.0 | **2.00x** |" in table
  written = (tmp_path / "out" / "bench.md").read_text()
  assert written.startswith("# Benchmarks\n\nCommand: `python run/benchmark.py`\n\n"
                            "Baseline revision: `abc1234`\n\n| size |")
  saved = json.loads((tmp_path / "out" / "bench.json").read_text())
  assert saved["command"] == "python run/benchmark.py" and len(saved["results"]) == 4


def test_int8_rows_are_compared_with_int8_peers_and_show_their_error():
  results = [row("xlnet_tf", 0.25), row("ort", 0.2), row("keras_hub", 0.5),
             row("xlnet_tf_int8", 0.2, relative_error=1e-3),
             row("ort_int8", 0.1, relative_error=2e-3),
             row("keras_hub_int8", 0.4, relative_error=3e-3)]
  for result in results:
    report.add_rates(result, {"float32": 100.0})
  assert "mfu" in results[1] and "mfu" not in results[4]  # no int8 matmul rate is measured
  table = report.markdown(results, {"float32": 100.0})
  assert "| MFU | peak RSS (GB) | int8 vs float |" in table
  assert "| tiny | 2x16 | float32 | forward | xlnet_tf | 128.0 | 0.80x |" in table  # vs ort
  assert "| forward | xlnet_tf_int8 | 160.0 | 0.50x |  | 1.50 | 1.0e-03 |" in table  # vs ort_int8
  assert "| forward | ort_int8 | 320.0 |  |  | 1.50 | 2.0e-03 |" in table
  assert "| forward | ort | 160.0 |  | " in table and "| 1.50 | |" in table
  assert "ONNX Runtime on the project's ONNX export" in table


def test_generation_is_compared_like_for_like_and_against_the_bandwidth_bound():
  """int8 generation against Hugging Face's int8 (quantize_dynamic), float against float; each
  step's time against the bytes of its weights over the measured bandwidth."""
  step = dict(mode="generate", new_tokens=4, bandwidth_gbs=20.0)
  results = [row("xlnet_tf", 1.0, step_seconds=0.2, weight_bytes=2_000_000_000,
                 product_gbs=12.5, **step),
             row("xlnet_tf_int8", 0.5, same_tokens=0.97, step_seconds=0.1,
                 weight_bytes=500_000_000, product_gbs=10.0, **step),
             row("hf_torch", 4.0, step_seconds=0.9, weight_bytes=2_000_000_000, **step),
             row("hf_torch_int8", 2.0, same_tokens=1.0, step_seconds=0.5,
                 weight_bytes=1_000_000_000, **step)]
  for result in results:
    report.add_rates(result, {"float32": 100.0})
  table = report.report_markdown(results, {"float32": 100.0})
  assert "| 2x16+4 | float32 | generate | xlnet_tf | 8.0 | 4.00x |  | 1.50 | |" in table
  assert ("| 2x16+4 | float32 | generate | xlnet_tf_int8 | 16.0 | 4.00x |  | 1.50 | 97% same "
          "tokens |") in table
  # bound = 2,000 MB / 20 GB/s = 100 ms against a 200 ms step: half of it; the weights at
  # the products' rate 2,000 MB / 12.5 GB/s = 160 ms
  assert ("| tiny | 2x16+4 | float32 | xlnet_tf | 8.0 | 200.0 | 2,000 | 20.0 | 100.0 | 50% | "
          "12.5 | 160.0 |" in table)
  assert "| xlnet_tf_int8 | 16.0 | 100.0 | 500 | 20.0 | 25.0 | 25% | 10.0 | 50.0 |" in table
  # a peer's products are not TensorFlow's: no rate
  assert "| hf_torch_int8 | 4.0 | 500.0 | 1,000 | 20.0 | 50.0 | 10% |  |  |" in table


def test_serving_rows_report_latency_percentiles():
  calls = [0.010] * 98 + [0.030, 0.050]
  results = [row("xlnet_tf_int8", 0.010, mode="serve", batch=1, call_seconds=calls),
             row("xlnet_tf", 0.020, mode="serve_text", batch=1, call_seconds=[0.02, 0.04])]
  for result in results:
    report.add_rates(result, {"float32": 100.0})
  table = report.report_markdown(results, {"float32": 100.0})
  assert "| p50 ms | p99 ms | requests/s (p50) | tokens/s (best) |" in table
  # p99 of 100 calls: between the 99th and 100th (numpy's linear interpolation)
  assert ("| tiny | 1x16 | float32 | serve | xlnet_tf_int8 | 100 | 10.0 | 30.2 | 100.0 | 1,600.0 |"
          in table)
  assert "| serve_text | xlnet_tf | 2 | 30.0 | 39.8 | 33.3 | 800.0 |" in table
  assert "serving_default signature on raw strings" in table


def test_the_chart_has_a_bar_per_implementation_of_this_revision(tmp_path, monkeypatch):
  results = [row("xlnet_tf", 0.25), row("hf_torch", 0.5), row("keras_hub", 1.0),
             row("xlnet_tf", 0.5, revision="abc1234"), row("xlnet_tf", 0.5, mode="train"),
             dict(row("hf_torch", None, mode="train"), error="killed")]
  for result in results:
    if "error" not in result:
      report.add_rates(result, {"float32": 100.0})
  drawn = {}
  save = report.plots.save

  def keep_axes(opened, axes, *arguments, **keywords):
    drawn["axis"] = axes[0]
    return save(opened, axes, *arguments, **keywords)
  monkeypatch.setattr(report.plots, "save", keep_axes)
  path = report.plot_tokens_per_second(results, str(tmp_path / "chart.png"))
  assert open(path, "rb").read(4) == b"\x89PNG"
  axis = drawn["axis"]
  bars = {container.get_label(): [bar.get_height() for bar in container]
          for container in axis.containers}
  assert bars == {"xlnet_tf": [128.0, 64.0], "hf_torch": [64.0], "keras_hub": [32.0]}
  assert [label.get_text() for label in axis.get_xticklabels()] == [
      "2x16\nfloat32\nforward", "2x16\nfloat32\ntrain"]
  assert axis.get_title() == "tiny model: tokens/s (higher is faster)"
  # The int8 and ONNX Runtime peers get bars of their own, rates written upright.
  results += [row("ort", 0.2), row("ort_int8", 0.1, relative_error=2e-3),
              row("keras_hub_int8", 0.4, relative_error=3e-3)]
  for result in results[-3:]:
    report.add_rates(result, {"float32": 100.0})
  report.plot_tokens_per_second(results, str(tmp_path / "peers.png"))
  axis = drawn["axis"]
  bars = {container.get_label(): [bar.get_height() for bar in container]
          for container in axis.containers}
  assert bars == {"xlnet_tf": [128.0, 64.0], "hf_torch": [64.0], "keras_hub": [32.0],
                  "ort": [160.0], "ort_int8": [320.0], "keras_hub_int8": [80.0]}
  assert {text.get_rotation() for text in axis.texts} == {90.0}


def test_rows_on_set_threads_are_labelled_and_compared_with_the_peers_best_setting():
  results = [row("xlnet_tf", 0.5), row("xlnet_tf", 0.25, cpu_threads=1),
             row("hf_torch", 1.0), row("hf_torch", 2.0, cpu_threads=1),
             row("xlnet_tf", 1.0, revision="abc1234"),
             row("xlnet_tf", 0.5, revision="abc1234", cpu_threads=1)]
  for result in results:
    report.add_rates(result, {"float32": 100.0})
  table = report.report_markdown(results, {"float32": 100.0})
  assert "| forward | xlnet_tf | 64.0 | 2.00x |" in table  # against hf_torch's faster setting
  assert "| forward | xlnet_tf (1 thread) | 128.0 | 4.00x |" in table
  assert "| forward | hf_torch (1 thread) | 16.0 |  |" in table
  assert "| forward | xlnet_tf (1 thread) @ abc1234 | 64.0 |  |" in table
  # --baseline: each setting against the same setting of the baseline revision
  assert table.count("| tiny | 2x16 | float32 | forward | 64.0 | 32.0 | **2.00x** |") == 1
  assert table.count("| tiny | 2x16 | float32 | forward | 128.0 | 64.0 | **2.00x** |") == 1
