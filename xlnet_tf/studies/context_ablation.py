"""Transformer-XL's Table 5 (the ablation of recurrence, position encoding and loss) and
Table 6 (RECL) in miniature: left-to-right LMs that differ in one switch each, trained with the
same budget (steps x tokens) on the long-document corpus (studies.long_document_corpus), then
evaluated on its held-out pages at growing attention lengths.

- Table 5: per variant, the perplexity at the training attention length (PPL init), the best
  over the evaluated lengths (PPL best) and the shortest length reaching it (Attn Len);
  median over seeds. A model with recurrence reads segments of its training length with a
  memory of (attention length - segment); one without, segments as long as the attention.
- Table 6: RECL of the group (the first seed's models) for r = 0.1, 0.5, 1.0
  (pretraining.context_length).

The paper's claim: only recurrence together with the relative encoding keeps improving as
the evaluation attention grows past the training length.
"""

import dataclasses
import os
from typing import Dict, List, Sequence

import keras
import numpy as np

from xlnet_tf import checkpoints
from xlnet_tf.utils import plots
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.heads.pretrainer import XLNetPretrainer
from xlnet_tf.utils.json_files import read_json, write_json
from xlnet_tf.pretraining import context_length, lm_evaluation, recipes
from xlnet_tf.pretraining.data.default_data import prepare_pretraining_data, read_text_files
from xlnet_tf.pretraining.loop import LM_DIR
from xlnet_tf.utils.progress import UnitProgress
from xlnet_tf.studies import pretraining_runs
from xlnet_tf.text.tokenizer import XLNetTokenizer


def _variant(encoding: str, recurrence: bool, loss: str) -> Dict:
  return {"pos_encoding": encoding, "recurrence": recurrence, "loss_positions": loss}


# The paper's rows (Table 5), and each encoding with and without recurrence.
VARIANTS = {
    "relative": _variant("relative", True, "full"),
    "relative_half": _variant("relative", True, "half"),
    "relative_no_recurrence": _variant("relative", False, "full"),
    "relative_no_recurrence_half": _variant("relative", False, "half"),
    "shaw": _variant("shaw", True, "full"),
    "shaw_no_recurrence": _variant("shaw", False, "full"),
    "shaw_no_recurrence_half": _variant("shaw", False, "half"),
    "absolute_sinusoid": _variant("absolute_sinusoid", True, "full"),
    "absolute_sinusoid_no_recurrence_half": _variant("absolute_sinusoid", False, "half"),
    "absolute_learned": _variant("absolute_learned", True, "full"),
    "absolute_learned_no_recurrence_half": _variant("absolute_learned", False, "half"),
}
RECL_RATIOS = (0.1, 0.5, 1.0)
# Transformer-XL's layout on the demo backbone: segments of 32, a memory of 128; the held-out
# loss every 500 steps.
RECIPE = recipes.recipe_for("clm", from_text=True).replace(eval_every=500)


@dataclasses.dataclass
class ContextStudyOptions:
  output_dir: str
  train_files: List[str]           # the long-document corpus: train/*.txt
  held_out_files: List[str]        # and valid/*.txt (Table 5 and RECL are measured on these)
  variants: Dict[str, Dict] = dataclasses.field(default_factory=lambda: dict(VARIANTS))
  # Every run's pretraining, before its variant's switches (the loop's options: XLA, ...).
  pretraining: recipes.PretrainingRecipeOptions = RECIPE
  seeds: Sequence[int] = (0, 1)
  attention_lengths: Sequence[int] = (32, 64, 128, 160, 256, 384, 512, 640)
  eval_tokens: int = 60_000        # held-out tokens of each perplexity
  eval_batch_size: int = 8         # parallel streams the held-out tokens are read in
  recl_lengths: Sequence[int] = tuple(range(32, 385, 32))  # evenly spaced: the step is Delta
  recl_tokens: int = 1000


def variant_recipe(study: ContextStudyOptions, overrides: Dict
                   ) -> recipes.PretrainingRecipeOptions:
  """The study's recipe with a variant's switches; a learned table covers what training
  sees (Shaw: the distances up to the training attention length; absolute: the positions of
  a segment), longer ones share its last row."""
  base = study.pretraining
  segment = base.data.seq_len
  memory = base.mem_len if overrides["recurrence"] else 0
  clamp = {"shaw": segment + memory, "absolute_learned": segment - 1}.get(
      overrides["pos_encoding"], -1)
  return base.replace(mem_len=memory, pos_encoding=overrides["pos_encoding"], clamp_len=clamp,
                      loss_positions=overrides["loss_positions"])


def _check(study: ContextStudyOptions) -> None:
  for name, overrides in study.variants.items():
    if set(overrides) != {"pos_encoding", "recurrence", "loss_positions"}:
      raise UserInputError(f"variant {name!r}: a variant sets pos_encoding, recurrence and "
                           f"loss_positions; got {sorted(overrides)}")
  if len(study.variants) < 2:
    raise UserInputError("RECL compares a group: give at least two variants")
  context_length.check_context_lengths(study.recl_lengths)  # before hours of training
  if sorted(study.attention_lengths)[0] < study.pretraining.data.seq_len:
    raise UserInputError(f"attention lengths start at the training segment "
                         f"({study.pretraining.data.seq_len}); got {list(study.attention_lengths)}")


def perplexities(model, ids, study: ContextStudyOptions, recurrence: bool) -> List[Dict]:
  """[{attention_length, perplexity, loss}] at each study attention length."""
  segment = study.pretraining.data.seq_len
  rows = []
  for length in study.attention_lengths:
    tgt_len, mem_len = (segment, length - segment) if recurrence else (length, 0)
    result = lm_evaluation.evaluate_stream(model, ids, tgt_len, mem_len,
                                           batch_size=study.eval_batch_size)
    rows.append({"attention_length": length, "perplexity": result.perplexity,
                 "loss": result.loss, "tgt_len": tgt_len, "mem_len": mem_len})
  return rows


def run_study(study: ContextStudyOptions, printer=print) -> Dict:
  """Trains (or reuses) every variant x seed, evaluates each, and writes results.json,
  results.md, perplexity.png and recl.png to output_dir."""
  _check(study)
  documents = read_text_files(study.train_files)
  recipe = study.pretraining
  data = prepare_pretraining_data(documents, os.path.join(study.output_dir, "data"),
                                  recipe.data, recipe.vocab_size, held_out_every=20)
  for report in data["reports"]:
    printer(report)
  tokenizer = XLNetTokenizer(data["sp_path"])
  ids, _ = lm_evaluation.text_stream(read_text_files(study.held_out_files), tokenizer)
  ids = ids[:study.eval_tokens + 1]
  runs = [(name, seed) for name in study.variants for seed in study.seeds]
  progress = UnitProgress(len(runs), printer)
  models, results = {}, {}
  for name, seed in runs:
    overrides = study.variants[name]
    model_dir = os.path.join(study.output_dir, "runs", f"{name}-seed{seed}")
    record_path = os.path.join(model_dir, "evaluation.json")
    run_recipe = variant_recipe(study, overrides)
    if not os.path.exists(record_path):
      keras.backend.clear_session()
      keras.utils.set_random_seed(seed)
      config = pretraining_runs.model_config(run_recipe, tokenizer.vocab_size)
      trained = pretraining_runs.pretrain(run_recipe, config, data, model_dir,
                                          [run_recipe.training.train_steps])
      model = checkpoints.load_pretrained_head(os.path.join(model_dir, LM_DIR), XLNetPretrainer)
      rows = perplexities(model, ids, study, overrides["recurrence"])
      train_length = run_recipe.data.seq_len + run_recipe.mem_len
      write_json(record_path, dict(trained, perplexities=rows, train_attention_length=(
          train_length), table5=context_length.table5_columns(rows, train_length)))
    results[(name, seed)] = read_json(record_path)
    if seed == study.seeds[0]:
      models[name] = os.path.join(model_dir, LM_DIR)
    table5 = results[(name, seed)]["table5"]
    progress.step(f"{name} seed {seed}: PPL init {table5['ppl_init']:.2f}, best "
                  f"{table5['ppl_best']:.2f} at {table5['attention_length_best']}")
  recl = relative_contexts(study, models, ids)
  summary = {"settings": _settings_record(study), "table5": table5_rows(study, results),
             "recl": recl, "runs": {f"{name}-seed{seed}": record
                                    for (name, seed), record in results.items()}}
  write_json(os.path.join(study.output_dir, "results.json"), summary)
  with open(os.path.join(study.output_dir, "results.md"), "w", encoding="utf-8") as handle:
    handle.write(results_markdown(summary))
  plot_figures(summary, study.output_dir)
  return summary


def relative_contexts(study: ContextStudyOptions, models: Dict[str, str], ids) -> Dict:
  """RECL of the first seed's models for each r (losses computed once, kept on disk)."""
  path = os.path.join(study.output_dir, "recl_losses.npz")
  wanted = [f"{name}/{c}" for name in models for c in study.recl_lengths]
  saved = {}
  if os.path.exists(path):
    with np.load(path) as archive:
      saved = {key: archive[key] for key in archive.files}
  if all(key in saved and len(saved[key]) == study.recl_tokens for key in wanted):
    losses = {name: {c: saved[f"{name}/{c}"] for c in study.recl_lengths} for name in models}
  else:  # none kept, or kept for other models, lengths or tokens
    keras.backend.clear_session()
    loaded = {name: checkpoints.load_pretrained_head(lm_dir, XLNetPretrainer)
              for name, lm_dir in models.items()}
    losses = context_length.group_token_losses(loaded, ids, study.recl_lengths,
                                               study.recl_tokens, study.pretraining.data.seq_len)
    np.savez(path, **{f"{name}/{c}": values for name, by_c in losses.items()
                      for c, values in by_c.items()})
  recl = {}
  for r in RECL_RATIOS:
    result = context_length.relative_context(losses, r=r)
    recl[str(r)] = {"recl": result.recl, "gains": result.gains}
  return recl


def table5_rows(study: ContextStudyOptions, results: Dict) -> Dict[str, Dict]:
  """Per variant: the median over seeds of PPL init and PPL best, the Attn Lens, the curve."""
  rows = {}
  for name, overrides in study.variants.items():
    records = [results[(name, seed)] for seed in study.seeds]
    inits = [r["table5"]["ppl_init"] for r in records if r["table5"]["ppl_init"] is not None]
    rows[name] = dict(overrides, ppl_init=float(np.median(inits)) if inits else None,
                      ppl_best=float(np.median([r["table5"]["ppl_best"] for r in records])),
                      attention_lengths_best=[r["table5"]["attention_length_best"]
                                              for r in records],
                      seeds=len(records))
  return rows


def results_markdown(summary: Dict) -> str:
  lines = ["### Table 5 in miniature (perplexity on held-out pages; median over seeds)", "",
           "| variant | recurrence | encoding | loss | PPL init | PPL best | Attn Len (per seed) |",
           "|---|---|---|---|---:|---:|---|"]
  for name, row in summary["table5"].items():
    init = "" if row["ppl_init"] is None else f"{row['ppl_init']:.2f}"
    lines.append(f"| {name} | {'yes' if row['recurrence'] else 'no'} | {row['pos_encoding']} | "
                 f"{row['loss_positions']} | {init} | {row['ppl_best']:.2f} | "
                 f"{', '.join(map(str, row['attention_lengths_best']))} |")
  lines += ["", "### Table 6 in miniature: RECL of the group (first seed)", "",
            "| variant | " + " | ".join(f"r = {r}" for r in summary["recl"]) + " |",
            "|---|" + "---:|" * len(summary["recl"])]
  for name in summary["table5"]:
    lines.append(f"| {name} | " + " | ".join(str(by_r["recl"][name])
                                             for by_r in summary["recl"].values()) + " |")
  return "\n".join(lines) + "\n"


def variant_styles(variants: Dict[str, Dict]) -> Dict[str, Dict]:
  """A look per variant that says what it is, the same in every figure: the colour its position
  encoding, the line its recurrence (solid with, dashed without), the marker its loss."""
  keys = [(v["pos_encoding"], not v["recurrence"], v["loss_positions"])
          for v in variants.values()]
  return dict(zip(variants, plots.combined_styles(keys)))


def plot_figures(summary: Dict, directory: str, prefix: str = "") -> List[str]:
  """The study's figures from its results (run_study's summary, or results.json read back):
  PREFIXperplexity.png (perplexity against attention length) and PREFIXrecl.png (RECL's
  relative gains at the first of RECL_RATIOS) in `directory`."""
  settings = summary["settings"]
  styles = variant_styles(settings["variants"])
  r = str(RECL_RATIOS[0])
  lengths = settings["recl_lengths"]
  recl = context_length.RelativeContext(summary["recl"][r]["recl"], summary["recl"][r]["gains"],
                                        RECL_RATIOS[0], lengths[1] - lengths[0])
  return [plot_perplexities(summary, styles, os.path.join(directory, f"{prefix}perplexity.png")),
          context_length.plot_relative_gains(recl, os.path.join(directory, f"{prefix}recl.png"),
                                             styles)]


def plot_perplexities(summary: Dict, styles: Dict[str, Dict], path: str) -> str:
  """PNG: perplexity against evaluation attention length, a line per variant (first seed)."""
  settings = summary["settings"]
  opened, (axis,) = plots.figure(width=9.5, height=5.0)  # the legend takes the right third
  for name in settings["variants"]:
    rows = summary["runs"][f"{name}-seed{settings['seeds'][0]}"]["perplexities"]
    axis.plot([row["attention_length"] for row in rows], [row["perplexity"] for row in rows],
              label=name, **styles[name])
  axis.axvline(settings["pretraining"]["data"]["seq_len"], color="grey", linestyle=":",
               label="training segment")
  plots.label_log_axis(axis, settings["attention_lengths"])
  return plots.save(opened, [axis], path, "evaluation attention length (tokens)",
                    "held-out perplexity", legend_size=8, legend_outside=True)


def _settings_record(study: ContextStudyOptions) -> Dict:
  record = dataclasses.asdict(study)
  record["pretraining"] = dataclasses.asdict(study.pretraining)
  return record
