"""The benchmark report: rates and model-FLOPs use of the measured rows, the Markdown tables
run/benchmark.py prints and writes (OUTPUT.md beside OUTPUT.json), and its chart of tokens/s
(--chart)."""

import numpy as np

from xlnet_tf.config import SIZE_PRESETS
from xlnet_tf.utils import files, plots
from xlnet_tf.utils.json_files import write_json
from xlnet_tf.benchmarks import finetuning_memory
from xlnet_tf.benchmarks.rows import (INFILL_MODES, INFILL_SPAN, INFILL_SPANS, LM_EVAL_MODES,
                                      VOCAB, lm_eval_tokens)

SIZES = {name: SIZE_PRESETS[name] for name in ("tiny", "demo", "base", "large")}
# This package's rows; every other implementation is a peer.
OWN = ("xlnet_tf", "xlnet_tf_int8")
# Rows with int8 weights (and activations quantized at run time): compared with int8 peers only,
# and without MFU (the matmul rate measured is float32's).
INT8 = ("xlnet_tf_int8", "ort_int8", "keras_hub_int8", "keras_hub_jax_int8", "hf_torch_int8")


def model_flops(size, batch, seq_len, mode, vocab=VOCAB):
  """Matmul FLOPs of one forward (x3 for a train step).

  Per layer: q, k, v, o projections (4 d^2 per token) and the FFN (2 d d_inner per token); the
  relative-position keys r (2T positions, shared by the batch); scores, position scores over
  2T relative positions, and the weighted values (4 T d per token). Plus, for the train step,
  the query stream at T/6 predictions and the logits over the vocabulary.
  """
  s = SIZES[size]
  d, layers, inner = s["d_model"], s["n_layer"], s["d_inner"]
  tokens = batch * seq_len
  per_layer = 2 * tokens * (4 * d * d + 2 * d * inner) + 2 * (2 * seq_len) * d * d
  per_layer += 2 * tokens * 4 * seq_len * d
  forward = layers * per_layer
  if mode == "train":
    predictions = batch * max(seq_len // 6, 1)
    forward += layers * 2 * predictions * (2 * d * d + 2 * d * inner + 4 * seq_len * d)
    forward += 2 * predictions * d * vocab
    return 3 * forward
  return forward


def add_rates(result, matmul):
  """tokens/s (the new tokens for generate) and, but for generate, model-FLOPs use."""
  if result["mode"] == "generate":
    result["tokens_per_sec"] = result["batch"] * result["new_tokens"] / result["seconds"]
    return
  if result["mode"] in INFILL_MODES:  # the blanks filled
    result["tokens_per_sec"] = result["batch"] * INFILL_SPANS * INFILL_SPAN / result["seconds"]
    return
  if result["mode"] in LM_EVAL_MODES:  # the tokens scored
    result["tokens_per_sec"] = lm_eval_tokens(result["mode"]) / result["seconds"]
    return
  result["tokens_per_sec"] = result["batch"] * result["seq_len"] / result["seconds"]
  if result["implementation"] in INT8:
    return
  flops = model_flops(result["size"], result["batch"], result["seq_len"], result["mode"],
                      result.get("vocab", VOCAB))
  result["mfu"] = flops / result["seconds"] / 1e9 / matmul[result["dtype"]]


def better_round(previous, result):
  """The faster of two measurements of one row (an error only when both failed); every
  round's time and the highest peak memory are kept."""
  if previous is None:
    return dict(result, round_seconds=[result.get("seconds")])
  rounds = previous["round_seconds"] + [result.get("seconds")]
  if "error" in result or ("error" not in previous and previous["seconds"] <= result["seconds"]):
    chosen = previous
  else:
    chosen = result
  peaks = [r["peak_rss_gb"] for r in (previous, result) if "peak_rss_gb" in r]
  return dict(chosen, round_seconds=rounds, **({"peak_rss_gb": max(peaks)} if peaks else {}))


def dropout_markdown(dropout):
  if not dropout:
    return ""
  elements = dropout[0].get("elements")
  lines = [f"\n| dropout layer | XLA | ms per call ({elements / 1e6:.1f}M elements) |"
           if elements else "\n| dropout layer | XLA | ms per call |", "|---|---|---:|"]
  for r in dropout:
    time_ms = f"{r['seconds'] * 1000:.1f}" if "error" not in r else f"error: {r['error']}"
    lines.append(f"| {r['layer']} | {'yes' if r['xla'] else 'no'} | {time_ms} |")
  return "\n".join(lines)


def data_stage_markdown(data_stage):
  if not data_stage:
    return ""
  if "error" in data_stage:
    return f"\nData stage: error: {data_stage['error']}"
  d, settings = data_stage, data_stage["settings"]
  return (f"\nData stage (`xlnet_tf.pretraining.data.stage`, {d['workers']} worker processes, the "
          f"Python documentation x{d['copies']}, {d['corpus_tokens']:,} tokens, seq_len "
          f"{settings['seq_len']}, reuse {settings['reuse_len']}, num_predict "
          f"{settings['num_predict']}, bi_data {settings['bi_data']}): "
          f"**{d['corpus_tokens_per_sec']:,.0f} corpus tokens/s**, "
          f"{d['example_tokens_per_sec']:,.0f} example tokens/s ({d['seconds']:.2f} s).")


def _same_shape(a, b, keys):
  return all(a[k] == b[k] for k in keys) and a.get("vocab", VOCAB) == b.get("vocab", VOCAB)


def _size(result):
  """The size column: the preset, and the vocabulary when it is not the released 32,000."""
  vocab = result.get("vocab", VOCAB)
  return result["size"] + (f" (V {vocab:,})" if vocab != VOCAB else "")


def _label(result):
  threads = result.get("cpu_threads")
  return (result["implementation"] + (f" ({result['device']})" if "device" in result else "")
          + (f" ({threads} thread{'s' if threads > 1 else ''})" if threads else "")
          + (f" @ {result['revision']}" if "revision" in result else ""))


def baseline_markdown(results):
  """This revision's xlnet_tf rows against the --baseline revision's: tokens/s and the ratio."""
  baseline = [r for r in results if "revision" in r]
  if not baseline:
    return ""
  lines = [f"\n\n| size | batch x seq | dtype | mode | this revision (tokens/s) | "
           f"{baseline[0]['revision']} (tokens/s) | ratio |", "|---|---|---|---|---:|---:|---:|"]
  for old in baseline:
    new = [r for r in results if r["implementation"] == "xlnet_tf" and "revision" not in r
           and r.get("cpu_threads") == old.get("cpu_threads")
           and _same_shape(r, old, ("size", "batch", "seq_len", "dtype", "mode"))]
    if not new or "error" in new[0] or "error" in old:
      ratio, new_rate, old_rate = "error", "", ""
    else:
      new_rate, old_rate = new[0]["tokens_per_sec"], old["tokens_per_sec"]
      ratio = f"**{new_rate / old_rate:.2f}x**"
      new_rate, old_rate = f"{new_rate:,.1f}", f"{old_rate:,.1f}"
    lines.append(f"| {_size(old)} | {old['batch']}x{old['seq_len']} | {old['dtype']} | "
                 f"{old['mode']} | {new_rate} | {old_rate} | {ratio} |")
  return "\n".join(lines)


def latency_markdown(results):
  """The serving rows' latency: percentiles over every timed call of the kept round (run
  --repeats=N for N calls), beside their throughput."""
  served = [r for r in results if r["mode"].startswith("serve") and "call_seconds" in r]
  if not served:
    return ""
  lines = ["\n\nSavedModel calls (loaded with tf.saved_model.load, no XLA unless serve_xla):\n",
           "| size | batch x seq | dtype | mode | implementation | calls | p50 ms | p99 ms | "
           "requests/s (p50) | tokens/s (best) |", "|---|---|---|---|---|---:|---:|---:|---:|---:|"]
  for r in served:
    p50, p99 = np.percentile(np.asarray(r["call_seconds"]) * 1e3, [50, 99])
    lines.append(f"| {_size(r)} | {r['batch']}x{r['seq_len']} | {r['dtype']} | {r['mode']} | "
                 f"{_label(r)} | {len(r['call_seconds'])} | {p50:.1f} | {p99:.1f} | "
                 f"{1e3 / p50:,.1f} | {r['tokens_per_sec']:,.1f} |")
  return "\n".join(lines)


def decoding_steps_markdown(results):
  """The generate rows' decoding step against the memory-bandwidth bound of the weights it
  reads: bound = weight bytes / the machine's read rate (component_rows.measure_bandwidth),
  share = bound / step time (1 = the step does nothing but stream its weights once); for
  xlnet_tf's rows also the time its weights take at the rate TensorFlow's products read
  feed-forward kernels at the step's rows (component_rows.measure_products): an estimate of
  the step's products, which a faster step needs a faster product than TensorFlow's to pass."""
  generated = [r for r in results if "step_seconds" in r and "error" not in r]
  if not generated:
    return ""
  lines = ["\n\nDecoding steps against the memory-bandwidth bound of their weights (step = "
           "(time of the call - time of the prompt and one token) / (new tokens - 1)):\n",
           "| size | batch x prompt+new | dtype | implementation | tokens/s | ms/step | "
           "weights read/step (MB) | bandwidth (GB/s) | bound (ms) | share of bound | "
           "products' read rate (GB/s) | weights at that rate (ms) |",
           "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
  for r in generated:
    step_ms, megabytes = r["step_seconds"] * 1e3, r["weight_bytes"] / 1e6
    bandwidth = r.get("bandwidth_gbs")
    bound = f"{megabytes / bandwidth:.1f}" if bandwidth else ""
    share = f"{megabytes / bandwidth / step_ms:.0%}" if bandwidth and step_ms else ""
    product_rate = r.get("product_gbs")
    products = (f" {product_rate:.1f} | {megabytes / product_rate:.1f} |" if product_rate
                else "  |  |")
    lines.append(f"| {_size(r)} | {r['batch']}x{r['seq_len']}+{r['new_tokens']} | {r['dtype']} |"
                 f" {_label(r)} | {r['tokens_per_sec']:,.1f} | {step_ms:.1f} | {megabytes:,.0f} |"
                 f" {bandwidth or 0:.1f} | {bound} | {share} |{products}")
  return "\n".join(lines)


def fastest_peer(r, results):
  """tokens/s of the fastest peer of row `r` in `results` (same shape, dtype and mode; a
  served SavedModel against the peers' forward; int8 against int8 peers, float against
  float), or None."""
  peer_mode = "forward" if r["mode"].startswith("serve") else r["mode"]
  int8 = r["implementation"] in INT8
  peers = [p["tokens_per_sec"] for p in results if "error" not in p
           and p["implementation"] not in OWN
           and (p["implementation"] in INT8) == int8
           and p["mode"] == peer_mode and _same_shape(p, r, ("size", "batch", "seq_len", "dtype"))]
  return max(peers) if peers else None


def markdown(results, matmul):
  # The int8 rows against their float model (relative error; generation: the share of the
  # same greedy tokens), when any row has it.
  errors = any("relative_error" in r or "same_tokens" in r for r in results)
  lines = ["| size | batch x seq | dtype | mode | implementation | tokens/s | vs fastest peer |"
           " MFU | peak RSS (GB) |" + (" int8 vs float |" if errors else ""),
           "|---|---|---|---|---|---:|---:|---:|---:|" + ("---:|" if errors else "")]
  for r in results:
    if "error" in r:
      lines.append(f"| {_size(r)} | {r['batch']}x{r['seq_len']} | {r['dtype']} | {r['mode']} |"
                   f" {_label(r)} | error: {r['error']} | | | |" + (" |" if errors else ""))
      continue
    peer = fastest_peer(r, results)
    ratio = (f"{r['tokens_per_sec'] / peer:.2f}x" if peer and r["implementation"] in OWN
             and "revision" not in r else "")
    shape = f"{r['batch']}x{r['seq_len']}" + (f"+{r['new_tokens']}" if "new_tokens" in r else "")
    mfu = f"{r['mfu']:.0%}" if "mfu" in r else ""
    error = ""
    if errors:
      error = (f" {r['relative_error']:.1e} |" if "relative_error" in r
               else f" {r['same_tokens']:.0%} same tokens |" if "same_tokens" in r else " |")
    lines.append(f"| {_size(r)} | {shape} | {r['dtype']} | {r['mode']} | "
                 f"{_label(r)} | {r['tokens_per_sec']:,.1f} | {ratio} | "
                 f"{mfu} | {r['peak_rss_gb']:.2f} |{error}")
  rates = ", ".join(f"{k} {v:.0f} GFLOP/s" for k, v in matmul.items())
  served = any(r["mode"].startswith("serve") for r in results)
  matmul_kind = ("8192x8192, PyTorch on the GPU" if any(r.get("device") == "cuda" for r in results)
                 else "2048x2048, TensorFlow")
  lines.append(f"\nDense matmul ({matmul_kind}, best round): {rates}. MFU = model "
               "matmul FLOPs / time / that rate at the run's precision."
               + (" serve: the exported SavedModel's serve_ids signature (xlnet_tf.serving; "
                  "serve_text: its serving_default signature on raw strings, tokenized in the "
                  "graph; serve_xla: exported with xla=True), against the peers' forward."
                  if served else "")
               + (" generate: batch x prompt + new tokens, greedy; tokens/s of new tokens."
                  if any(r["mode"] == "generate" for r in results) else "")
               + (" ort / ort_int8: ONNX Runtime on the project's ONNX export (float32 / after "
                  "quantize_onnx_int8)." if any(r["implementation"].startswith("ort")
                                                 for r in results) else "")
               + (" int8 rows (int8 weights, activations quantized at run time) are compared "
                  "with int8 peers (hf_torch_int8: PyTorch's quantize_dynamic), float rows "
                  "with float peers; their relative error is ||int8 - float|| / ||float|| of the "
                  "output against their float model's on the same inputs (generation: the "
                  "share of new tokens equal to the float model's greedy tokens)."
                  if any(r["implementation"] in INT8 for r in results)
                  else ""))
  return "\n".join(lines)


def report_markdown(results, matmul, dropout=(), data_stage=None) -> str:
  """Every table of a speed run: the rows, the --baseline ratios, dropout, the data stage."""
  return (markdown(results, matmul) + latency_markdown(results)
          + decoding_steps_markdown(results) + baseline_markdown(results)
          + dropout_markdown(dropout)
          + data_stage_markdown(data_stage))


def write_report(output, results, matmul, command, dropout=(), data_stage=None) -> str:
  """The tables (returned), and with `output` OUTPUT.json (the raw rows) and OUTPUT.md."""
  table = report_markdown(results, matmul, dropout, data_stage)
  if output:
    write_json(output + ".json", {"command": command, "matmul_gflops": matmul,
                                  "results": results, "dropout": list(dropout),
                                  "data_stage": data_stage})
    baselines = sorted({r["revision"] for r in results if "revision" in r})
    baseline = "".join(f"Baseline revision: `{revision}`\n\n" for revision in baselines)
    files.write_text(output + ".md", f"# Benchmarks\n\nCommand: `{command}`\n\n{baseline}"
                     f"{table}\n\nHow these were reached, and this machine's limits: "
                     "docs/performance.md.\n")
  return table


def write_memory_report(output, results, budget_gb: float, command) -> str:
  """The fine-tuning memory table (returned), and with `output` OUTPUT.json and OUTPUT.md."""
  rows = finetuning_memory.memory_table(results, budget_gb)
  table = finetuning_memory.memory_markdown(rows, budget_gb)
  if output:
    write_json(output + ".json", {"command": command, "results": results, "rows": rows})
    files.write_text(output + ".md",
                     f"# Fine-tuning memory\n\nCommand: `{command}`\n\n{table}\n")
  return table


def plot_tokens_per_second(results, path: str, title: str = "") -> str:
  """PNG: tokens/s as grouped bars, a group per measured case (size, batch x seq, dtype, mode),
  a bar per implementation, each with its rate written on it; this revision's rows only (no
  --baseline rows, no errors)."""
  rows = [r for r in results if "error" not in r and "revision" not in r]
  cases = list(dict.fromkeys((_size(r), f"{r['batch']}x{r['seq_len']}", r["dtype"], r["mode"])
                             for r in rows))
  implementations = list(dict.fromkeys(r["implementation"] for r in rows))
  rate = {((_size(r), f"{r['batch']}x{r['seq_len']}", r["dtype"], r["mode"]),
           r["implementation"]): r["tokens_per_sec"] for r in rows}
  # Many implementations (the int8 and ONNX Runtime rows): a wider group, rates written upright.
  upright = len(implementations) > 4
  opened, (axis,) = plots.figure(
      width=max(6.0, len(cases) * max(1.2, 0.5 * len(implementations))), height=4.5)
  width = 0.8 / len(implementations)
  for index, (implementation, style) in enumerate(zip(
      implementations, plots.distinct_styles(len(implementations)))):
    present = [i for i, case in enumerate(cases) if (case, implementation) in rate]
    bars = axis.bar(np.array(present) + (index - (len(implementations) - 1) / 2) * width,
                    [rate[(cases[i], implementation)] for i in present], width,
                    color=style["color"], label=implementation)
    axis.bar_label(bars, fmt="{:,.0f}", fontsize=7, padding=2, rotation=90 if upright else 0)
  sizes = list(dict.fromkeys(case[0] for case in cases))  # one: in the title, not every tick
  axis.set_xticks(range(len(cases)), ["\n".join(case if len(sizes) > 1 else case[1:])
                                      for case in cases], fontsize=8)
  axis.set_title(title or (f"{sizes[0]} model: " if len(sizes) == 1 else "")
                 + "tokens/s (higher is faster)")
  axis.margins(y=0.25 if upright else 0.12)  # room for the rates above the bars
  return plots.save(opened, [axis], path, None, "tokens/s", legend_size=8)
