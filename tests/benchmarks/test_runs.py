"""A run of run/benchmark.py (xlnet_tf.benchmarks.runs) without measuring: the grid of rows
its flags name, the ONNX exports its ort rows share, and a report rebuilt from its JSON."""

import json

import pytest

from xlnet_tf.benchmarks import report, rows, runs
from xlnet_tf.utils.errors import UserInputError


def test_the_grid_names_every_row_once_in_the_order_measured():
  run = runs.SpeedRun(sizes=["tiny"], shapes=["2x16", "1x32"], dtypes=["float32", "bfloat16"],
                      modes=["forward", "train"], vocab_sizes=[rows.VOCAB, 2000],
                      implementations=["xlnet_tf", "hf_torch", "ort", "xlnet_tf_int8"])
  baseline = {"revision": "main (abc1234)", "source": "/tmp/baseline"}
  specs = runs.speed_specs(run, run.implementations, baseline, onnx_dir="/tmp/onnx")
  first = [(s["dtype"], s["mode"], s.get("vocab"), s["implementation"], s.get("revision"))
           for s in specs if (s["batch"], s["seq_len"]) == (2, 16)]
  forward = ("float32", "forward")
  assert first[:7] == [
      (*forward, None, "xlnet_tf", None), (*forward, None, "hf_torch", None),
      (*forward, None, "ort", None), (*forward, None, "xlnet_tf_int8", None),
      (*forward, None, "xlnet_tf", "main (abc1234)"),  # after this revision's
      (*forward, 2000, "xlnet_tf", None), (*forward, 2000, "hf_torch", None)]
  # bfloat16: no ONNX or int8 rows (float32 files and models); train: xlnet_tf and hf_torch.
  assert {s["implementation"] for s in specs if s["dtype"] == "bfloat16"} == {"xlnet_tf",
                                                                               "hf_torch"}
  assert {s["implementation"] for s in specs if s["mode"] == "train"} == {"xlnet_tf",
                                                                           "hf_torch"}
  assert all(("onnx_dir" in s) == (s["implementation"] == "ort") for s in specs)
  # Per shape and vocabulary: float32 forward 4 + the baseline's, the other three 2 + 1.
  assert len(specs) == len({json.dumps(s, sort_keys=True) for s in specs}) == 2 * 2 * (5 + 3 * 3)


def test_ort_rows_share_one_export_per_model_shape_and_report_its_failure():
  specs = [dict(size="tiny", batch=batch, seq_len=16, dtype="float32", mode="forward",
                implementation=implementation, onnx_dir="/tmp/onnx", **extra)
           for batch in (1, 2) for implementation in ("xlnet_tf", "ort", "ort_int8")
           for extra in ({}, {"vocab": 2000})]
  exported = []

  def measure(spec):
    exported.append(spec)
    return dict(spec, error="RuntimeError: no tf2onnx") if "vocab" in spec else dict(spec)
  errors = runs._export_onnx_files(specs, measure)
  assert [(s["implementation"], s.get("vocab")) for s in exported] == [
      ("onnx_export", None), ("onnx_export", 2000)]  # the batch shares the file
  assert errors == {("tiny", 16, 2000): "RuntimeError: no tf2onnx"}


def test_generate_rows_of_xlnet_tf_get_the_read_rate_of_their_products_at_their_rows():
  """Each round measures the product rate once per (size, two rows per text, int8, threads) of
  the xlnet_tf generate rows, on the rows' threads; a row keeps the best round's rate; peers
  and other modes get none."""
  run = runs.SpeedRun(sizes=["tiny"], shapes=["1x16", "8x16"], dtypes=["float32"],
                      modes=["generate"], implementations=[], rounds=2)
  specs = [dict(size="tiny", batch=batch, seq_len=16, dtype="float32", mode=mode,
                implementation=implementation, new_tokens=4)
           for batch in (1, 8) for implementation in ("xlnet_tf", "xlnet_tf_int8", "hf_torch")
           for mode in ("generate", "forward")]
  specs.append(dict(specs[0], cpu_threads=1))  # float32 at batch 1 on one thread
  asked = []
  rates = iter([5.0, 6.0, 7.0, 8.0, 3.0, 4.0, 9.0, 1.0, 2.0, 5.0])  # 2 rounds of 5 product rows

  def measure(spec):
    if spec["implementation"] == "products":
      asked.append((spec["size"], spec["rows"], spec["int8"], spec.get("cpu_threads")))
      return dict(spec, gbs=next(rates))
    if spec["implementation"] in ("matmul", "bandwidth"):
      return dict(spec, gflops=100.0, gbs=20.0)
    return dict(spec, seconds=1.0, step_seconds=0.1, weight_bytes=10 ** 9)
  results, _ = runs._measure_rounds(run, specs, measure, {})
  keys = {("tiny", 2, False, None), ("tiny", 2, True, None), ("tiny", 16, False, None),
          ("tiny", 16, True, None), ("tiny", 2, False, 1)}
  assert len(asked) == 10 and set(asked[:5]) == set(asked[5:]) == keys  # once a round each
  first_round = dict(zip(asked[:5], [5.0, 6.0, 7.0, 8.0, 3.0]))
  second_round = dict(zip(asked[5:], [4.0, 9.0, 1.0, 2.0, 5.0]))
  best = {key: max(first_round[key], second_round[key]) for key in first_round}
  for result in results:
    key = ("tiny", 2 * result["batch"], result["implementation"] == "xlnet_tf_int8",
           result.get("cpu_threads"))
    if result["mode"] == "generate" and result["implementation"] != "hf_torch":
      assert result["product_gbs"] == best[key], result
    else:
      assert "product_gbs" not in result, result


def test_a_shape_that_is_not_batch_x_length_is_one_line():
  assert runs.parse_shape("4x128") == (4, 128)
  with pytest.raises(UserInputError, match=r"--shapes must be BATCHxSEQ_LEN pairs such as "
                                           r"4x128; got '4-128'"):
    runs.parse_shape("4-128")


def test_a_report_is_rebuilt_from_its_json(tmp_path, capsys):
  measured = [{"size": "tiny", "batch": 2, "seq_len": 16, "dtype": "float32", "mode": "forward",
               "implementation": name, "seconds": seconds, "peak_rss_gb": 1.5}
              for name, seconds in (("xlnet_tf", 0.25), ("hf_torch", 0.5))]
  for result in measured:
    report.add_rates(result, {"float32": 100.0})
  table = report.write_report(str(tmp_path / "run"), measured, {"float32": 100.0},
                              "python run/benchmark.py --sizes=tiny")
  rebuilt = runs.rebuild_report(str(tmp_path / "run.json"), str(tmp_path / "again"))
  assert rebuilt == table and table in capsys.readouterr().out
  assert (tmp_path / "again.md").read_text() == (tmp_path / "run.md").read_text()
  (tmp_path / "other.json").write_text('{"command": "python run/pretrain.py"}')
  with pytest.raises(UserInputError, match="other.json: not a run/benchmark.py report"):
    runs.rebuild_report(str(tmp_path / "other.json"))
