"""A transfer study in the manner of XLNet's Table 6: pretrain variants, fine-tune each.

For one pretraining corpus and a list of variants (the objective and the switches the paper
ablates), every variant pretrains the same backbone with the same budget (steps x tokens);
then every variant and a random-init row are fine-tuned on each downstream task with the same
seeds and the same learning-rate sweep. Per row and task, the learning rate is the one with the
best median dev accuracy over seeds; the row reports the test accuracy at that rate (median,
min and max over seeds). Held-out pretraining losses are recorded along the way (curves).

The library half of `run/transfer.py`; `run_study` is what the suite runs on a tiny setting.
"""

import dataclasses
import functools
import os
import shutil
import tempfile
from typing import Dict, List, Optional, Sequence

import keras
import numpy as np

from xlnet_tf import checkpoints
from xlnet_tf.utils import plots
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.config import XLNetConfig
from xlnet_tf.heads.pretrainer import XLNetPretrainer
from xlnet_tf.utils.json_files import read_json, write_json
from xlnet_tf.utils.progress import UnitProgress
from xlnet_tf.pretraining.data.default_data import prepare_pretraining_data, read_text_files
from xlnet_tf.pretraining import recipes
from xlnet_tf.pretraining.loop import LM_DIR, PRETRAINED_DIR
from xlnet_tf.pretraining.data.records import RECORD_INFO_FILE
from xlnet_tf.pretraining.data.stage import create_pretraining_data
from xlnet_tf.studies import ablation_table, budget_trend, infilling_evaluation, pretraining_runs
from xlnet_tf.studies.ablation_table import RANDOM_INIT
from xlnet_tf.tasks import classification
from xlnet_tf.tasks.finetuning import FinetuningOptions
from xlnet_tf.tasks.classification.metrics import classification_metrics
from xlnet_tf.text.tokenizer import XLNetTokenizer

# Table 6's rows on this backbone: name -> what differs from `perm` (XLNet as released).
VARIANTS = {
    "perm": {},
    "mlm": {"objective": "mlm"},
    "perm_no_memory": {"mem_len": 0},
    "perm_token_level": {"span_prediction": False},
    "perm_no_bi_data": {"bi_data": False},
    "perm_next_sentence": {"next_sentence": True},
    "mlm_no_memory": {"objective": "mlm", "mem_len": 0},
}
# What changes the TFRecords: besides Table 6's rows, the recipe's K (num_predict targets of
# seq_len), the span length (max_span_words) and the context around a span (mask_alpha).
DATA_KEYS = ("objective", "span_prediction", "bi_data", "num_predict", "max_span_words",
             "mask_alpha")
RUN_KEYS = ("mem_len", "next_sentence", "learning_rate")  # what changes the run only


@dataclasses.dataclass
class Task:
  name: str
  train: str
  dev: str
  test: str


# The study's pretraining: recipes.FROM_TEXT (which this study chose), its held-out loss curve
# every 200 steps.
RECIPE = recipes.FROM_TEXT.replace(eval_every=200)


@dataclasses.dataclass
class TransferStudyOptions:
  output_dir: str
  corpus_files: List[str]
  tasks: List[Task]
  variants: Dict[str, Dict] = dataclasses.field(
      default_factory=lambda: {name: VARIANTS[name] for name in ("perm", "mlm")})
  # Every variant's pretraining, before its overrides: model, data, and the loop's options
  # (optimisation, steps, the held-out curve's eval_every, XLA).
  pretraining: recipes.PretrainingRecipeOptions = RECIPE
  seeds: Sequence[int] = (0, 1, 2)
  learning_rates: Sequence[float] = (1e-4, 3e-4)
  # Every fine-tuning run's options, but for its learning rate (of learning_rates), its seed
  # (of seeds) and its warmup (a tenth of the steps).
  finetuning: FinetuningOptions = dataclasses.field(
      default_factory=functools.partial(FinetuningOptions, train_steps=300, batch_size=32,
                                        eval_every=100, jit_compile=True))
  max_seq_length: int = 128
  finetune_dropout: float = 0.1
  summary_type: str = "last"       # the classifier's pooling (XLNet's: the <cls> state)
  seed: int = 0                    # of the data and the pretraining
  # Intrinsic evaluations on held-out text (studies.infilling_evaluation): sentences per span
  # length (0: none) and the distractors of the cloze ranking.
  intrinsic_examples: int = 0
  cloze_distractors: int = 4
  # Pretraining steps at which every variant's backbone is also kept and evaluated as a row of
  # its own, NAME@STEP: the budget trend along one run (whose learning rate decays to the
  # end of train_steps, so a snapshot has not cooled down as a run of that length would have).
  snapshots: Sequence[int] = ()

  def variant(self, overrides: Dict) -> recipes.PretrainingRecipeOptions:
    """The pretraining recipe of a variant: the study's with the variant's settings."""
    return self.pretraining.replace(**overrides)


def _data_key(overrides: Dict) -> tuple:
  return tuple((key, overrides[key]) for key in DATA_KEYS if key in overrides)


def _check_variants(variants: Dict[str, Dict], study: "TransferStudyOptions" = None) -> None:
  """Names and settings, and with `study` their values (each variant's recipe is built), before
  the study writes anything."""
  for name, overrides in variants.items():
    unknown = set(overrides) - set(DATA_KEYS) - set(RUN_KEYS)
    if unknown:
      raise UserInputError(f"variant {name!r}: unknown settings {sorted(unknown)}; a variant sets "
                           f"{DATA_KEYS + RUN_KEYS}")
    if study is not None:
      try:
        study.variant(overrides)
      except UserInputError as error:
        raise UserInputError(f"variant {name!r}: {error}") from None
  if RANDOM_INIT in variants:
    raise UserInputError(f"{RANDOM_INIT!r} is the study's own baseline row, not a variant name")


def prepare_variant_data(study: TransferStudyOptions, printer=print) -> Dict[tuple, Dict[str, str]]:
  """TFRecords for every distinct data setting of the variants; one corpus split and one
  SentencePiece model for all. Returns {data key: {"train", "valid", "sp_path"}}."""
  documents = read_text_files(study.corpus_files)
  base_dir = os.path.join(study.output_dir, "data", "base")
  recipe = study.pretraining
  base = prepare_pretraining_data(documents, base_dir, recipe.data, recipe.vocab_size,
                                  study.seed, held_out_every=recipe.held_out_every)
  for report in base["reports"]:
    printer(report)
  corpus_dir = os.path.join(base_dir, "corpus")
  train_files = sorted(os.path.join(corpus_dir, f) for f in os.listdir(corpus_dir)
                       if f.startswith("train-"))
  valid_files = sorted(os.path.join(corpus_dir, f) for f in os.listdir(corpus_dir)
                       if f.startswith("valid-"))
  data = {}
  for overrides in study.variants.values():
    key = _data_key(overrides)
    if key in data:
      continue
    settings = study.variant(dict(key)).data
    if settings == recipe.data:
      data[key] = {"train": base["train"], "valid": base["valid"], "sp_path": base["sp_path"]}
      continue
    directory = os.path.join(study.output_dir, "data",
                             "-".join(f"{k}={v}" for k, v in key))
    paths = {"sp_path": base["sp_path"]}
    for split, files in (("train", train_files), ("valid", valid_files)):
      if not files:  # a corpus too small to hold a part out has no held-out data
        paths[split] = None
        continue
      target = os.path.join(directory, split)
      if not os.path.exists(os.path.join(target, RECORD_INFO_FILE)):
        summary = create_pretraining_data(files, base["sp_path"], target, settings,
                                          seed=study.seed, split=split)
        printer(f"[{split} {dict(key)}] " + summary.report())
      paths[split] = target
    data[key] = paths
  return data


def snapshot_row(name: str, step: int) -> str:
  return f"{name}@{step}"


def _stops(study: TransferStudyOptions, overrides: Dict) -> List[int]:
  """The steps at which a variant's backbone is kept: its snapshots, then its full budget."""
  steps = study.variant(overrides).training.train_steps
  return sorted({s for s in study.snapshots if 0 < s < steps}) + [steps]


def pretrain_variant(study: TransferStudyOptions, name: str, overrides: Dict, data: Dict[str, str]
                     ) -> Dict:
  """Pretrains one variant (skipped when its backbone exists); returns its record, with the
  backbones kept at `study.snapshots` under "snapshots": {step: {"backbone", "lm"}}."""
  recipe = study.variant(overrides)
  model_dir = os.path.join(study.output_dir, "pretraining", name)
  record_path = os.path.join(model_dir, "variant.json")
  if os.path.exists(record_path):
    return read_json(record_path)
  n_token = XLNetTokenizer(data["sp_path"]).vocab_size
  config = pretraining_runs.model_config(recipe, n_token)
  keras.backend.clear_session()
  keras.utils.set_random_seed(study.seed)
  run = pretraining_runs.pretrain(recipe, config, data, model_dir, _stops(study, overrides))
  record = dict(run, name=name, overrides=overrides,
                backbone=os.path.join(model_dir, PRETRAINED_DIR))
  write_json(record_path, record)
  return record


def row_backbones(pretrained: Dict[str, Dict]) -> Dict[str, Dict[str, str]]:
  """{row: {"backbone", "lm"}} of every pretrained row: each variant's snapshots (NAME@STEP,
  in step order) before the variant at its full budget."""
  rows = {}
  for name, record in pretrained.items():
    for step, kept in sorted(record.get("snapshots", {}).items(), key=lambda i: int(i[0])):
      rows[snapshot_row(name, int(step))] = kept
    rows[name] = {"backbone": record["backbone"],
                  "lm": os.path.join(os.path.dirname(record["backbone"]), LM_DIR)}
  return rows


def load_study_task(task: Task, tokenizer: XLNetTokenizer, max_seq_length: int
                    ) -> classification.TaskData:
  """A generic classification task whose labels are the training file's, sorted."""
  files = {"train": task.train, "dev": task.dev, "test": task.test}
  loaded = classification.load_task(
      classification.TaskDataOptions("generic", files=files, max_seq_length=max_seq_length),
      tokenizer, splits=("train", "dev", "test"))
  loaded.name = task.name
  return loaded


def finetune_once(study: TransferStudyOptions, config: XLNetConfig,
                  task: classification.TaskData, backbone_dir: Optional[str],
                  learning_rate: float, seed: int) -> Dict:
  """Dev (best over the run) and test accuracy of one fine-tuning run."""
  keras.backend.clear_session()
  keras.utils.set_random_seed(seed)
  # The study prints its own [k/n] lines; a bar per run would bury them.
  options = dataclasses.replace(study.finetuning, learning_rate=learning_rate,
                                warmup_steps=study.finetuning.train_steps // 10, seed=seed,
                                progress="none")
  model = classification.build_classifier(config, task, study.summary_type, backbone_dir, "own")
  best_dir = tempfile.mkdtemp(prefix="transfer_best_")
  try:
    result = classification.train_classifier(model, task, options, best_dir)
  finally:
    shutil.rmtree(best_dir, ignore_errors=True)
  logits = classification.predict_logits(model, task.splits["test"], options.batch_size)
  test = classification_metrics(task.splits["test"]["label"], logits, "accuracy")["accuracy"]
  return {"dev": result["best"]["accuracy"], "test": test, "learning_rate": learning_rate,
          "seed": seed, "best_step": result["best"]["step"]}


def summarize_row(runs: List[Dict]) -> Dict:
  """The learning rate with the best median dev accuracy, and test accuracy there."""
  by_rate = {}
  for run in runs:
    by_rate.setdefault(run["learning_rate"], []).append(run)
  chosen = max(by_rate, key=lambda rate: (np.median([r["dev"] for r in by_rate[rate]]), -rate))
  tests = [r["test"] for r in by_rate[chosen]]
  return {"learning_rate": chosen, "test_median": float(np.median(tests)),
          "test_min": float(min(tests)), "test_max": float(max(tests)),
          "dev_median": float(np.median([r["dev"] for r in by_rate[chosen]])),
          "seeds": len(tests)}


def run_study(study: TransferStudyOptions, printer=print) -> Dict:
  """Runs (or resumes: finished pretraining and fine-tuning runs are kept in output_dir) the
  whole study; writes results.json, results.md and held_out_loss.png there."""
  _check_variants(study.variants, study)
  os.makedirs(study.output_dir, exist_ok=True)
  pretrained_rows = sum(len(_stops(study, overrides)) for overrides in study.variants.values())
  finetunes = ((1 + pretrained_rows) * len(study.tasks) * len(study.seeds)
               * len(study.learning_rates))
  # A pretraining run costs about as much as this many fine-tuning runs (for the ETA only).
  pretrain_units = max(study.pretraining.training.train_steps
                       / max(study.finetuning.train_steps, 1) / 2, 1.0)
  progress = UnitProgress(finetunes + pretrain_units * len(study.variants), printer)
  data = prepare_variant_data(study, printer)
  sp_path = next(iter(data.values()))["sp_path"]
  pretrained = {}
  for name, overrides in study.variants.items():
    pretrained[name] = pretrain_variant(study, name, overrides, data[_data_key(overrides)])
    curve = pretrained[name]["held_out"]
    progress.step(f"pretrained {name}: {pretrained[name]['steps']} steps, held-out loss "
                  f"{curve[0]['loss']:.3f} -> {curve[-1]['loss']:.3f}", pretrain_units)
  backbones = row_backbones(pretrained)
  rows = [RANDOM_INIT] + list(backbones)
  tokenizer = XLNetTokenizer(sp_path)
  intrinsic = {row: intrinsic_scores(study, paths["lm"], tokenizer)
               for row, paths in backbones.items()} if study.intrinsic_examples else {}
  config = classification_config(study, tokenizer.vocab_size)
  runs_path = os.path.join(study.output_dir, "finetuning_runs.json")
  runs = read_json(runs_path) if os.path.exists(runs_path) else []
  done = {(r["task"], r["row"], r["learning_rate"], r["seed"]) for r in runs}
  for task_files in study.tasks:
    task = load_study_task(task_files, tokenizer, study.max_seq_length)
    for row in rows:
      backbone = None if row == RANDOM_INIT else backbones[row]["backbone"]
      for learning_rate in study.learning_rates:
        for seed in study.seeds:
          if (task.name, row, learning_rate, seed) in done:
            progress.step(f"{task.name} / {row} lr {learning_rate:g} seed {seed}: kept")
            continue
          run = dict(finetune_once(study, config, task, backbone, learning_rate, seed),
                     task=task.name, row=row)
          runs.append(run)
          write_json(runs_path, runs)
          progress.step(f"{task.name} / {row} lr {learning_rate:g} seed {seed}: dev "
                        f"{run['dev']:.3f} test {run['test']:.3f}")
  results = {"settings": _settings_record(study), "pretraining": pretrained,
             "intrinsic": intrinsic,
             "finetuning": {task.name: {row: summarize_row(
                 [r for r in runs if r["task"] == task.name and r["row"] == row])
                 for row in rows} for task in study.tasks},
             "runs": runs}
  write_json(os.path.join(study.output_dir, "results.json"), results)
  with open(os.path.join(study.output_dir, "results.md"), "w", encoding="utf-8") as handle:
    handle.write(results_markdown(results))
  plot_held_out_curves(pretrained, os.path.join(study.output_dir, "held_out_loss.png"))
  ablation_table.plot_ablation(results, os.path.join(study.output_dir, "variants.png"))
  if study.snapshots:
    budget_trend.plot_trend(results, os.path.join(study.output_dir, "budget_trend.png"))
  return results


def intrinsic_scores(study: TransferStudyOptions, lm_dir: str, tokenizer: XLNetTokenizer) -> Dict:
  """Span infilling and cloze ranking on held-out text of the backbone with its LM head in
  `lm_dir` (kept beside it: intrinsic.json)."""
  path = os.path.join(os.path.dirname(lm_dir), "intrinsic.json")
  if os.path.exists(path):
    return read_json(path)
  keras.backend.clear_session()
  # Reading left to right or in any order: bi_data and same_length are training settings.
  model = checkpoints.load_pretrained_head(lm_dir, XLNetPretrainer, bi_data=False,
                                           same_length=False)
  held_out = os.path.join(study.output_dir, "data", "base", "corpus", "valid-*.txt")
  scores = infilling_evaluation.intrinsic_evaluation(
      model, tokenizer, infilling_evaluation.held_out_sentences(held_out),
      count=study.intrinsic_examples, distractors=study.cloze_distractors, seed=study.seed)
  write_json(path, scores)
  return read_json(path)  # the keys as JSON has them (span lengths as strings)


def classification_config(study: TransferStudyOptions, n_token: int) -> XLNetConfig:
  """The fine-tuning backbone: the pretrained architecture, no memory, task dropout."""
  return pretraining_runs.model_config(study.pretraining, n_token).for_finetuning(
      dropout=study.finetune_dropout, dropatt=study.finetune_dropout)


def results_markdown(results: Dict) -> str:
  lines = []
  for task, rows in results["finetuning"].items():
    baseline = rows[RANDOM_INIT]["test_median"]
    lines += [f"### {task}", "",
              "| row | test accuracy (median) | min - max | vs random init | lr | dev (median) |",
              "|---|---:|---:|---:|---:|---:|"]
    for row, summary in rows.items():
      gain = "" if row == RANDOM_INIT else f"{100 * (summary['test_median'] - baseline):+.1f}"
      lines.append(f"| {row} | {100 * summary['test_median']:.1f} | "
                   f"{100 * summary['test_min']:.1f} - {100 * summary['test_max']:.1f} | "
                   f"{gain} | {summary['learning_rate']:g} | {100 * summary['dev_median']:.1f} |")
    lines.append("")
  lines += ["### The variants side by side (test accuracy: median over seeds, gain over random "
            "init)", "", ablation_table.ablation_markdown(results)]
  lines += ["### Pretraining", "", "| variant | steps | tokens | minutes | held-out loss start -> "
            "end |", "|---|---:|---:|---:|---|"]
  for name, record in results["pretraining"].items():
    curve = record["held_out"]
    lines.append(f"| {name} | {record['steps']} | {record['tokens']:,} | "
                 f"{record['seconds'] / 60:.1f} | {curve[0]['loss']:.3f} -> "
                 f"{curve[-1]['loss']:.3f} |")
  trend = budget_trend.trend_markdown(results)
  if trend:
    lines += ["", "### Budget trend (test accuracy: median over seeds, gain over random init)",
              "", trend]
  if results.get("intrinsic"):
    lines += ["", "### Span infilling (exact match, %) and cloze ranking on held-out text", "",
              infilling_evaluation.intrinsic_markdown(results["intrinsic"])]
  return "\n".join(lines) + "\n"


def plot_held_out_curves(pretrained: Dict, path: str) -> str:
  """PNG of each variant's held-out LM loss against pretraining steps."""
  opened, (axis,) = plots.figure()
  for name, record in pretrained.items():
    curve = record["held_out"]
    axis.plot([p["step"] for p in curve], [p["loss"] for p in curve], marker="o", label=name)
  axis.set_title("Held-out loss of each variant (perm and mlm predict different things)")
  return plots.save(opened, [axis], path, "pretraining step",
                    "held-out LM loss (nats per predicted token)")


def _settings_record(study: TransferStudyOptions) -> Dict:
  record = dataclasses.asdict(study)
  record["tasks"] = [dataclasses.asdict(t) for t in study.tasks]
  return record

