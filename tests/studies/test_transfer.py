"""The transfer study end to end on a tiny setting, and its row summary."""

import json
import os

import pytest

from forked_tools import run_forked
from xlnet_tf.inference import infilling
from xlnet_tf.pretraining.data import corpus
from xlnet_tf.studies import transfer


def _topic_task(directory):
  """Sentences of three Python-documentation topics, labelled by topic."""
  from pydoc_data import topics
  names = ("typesseq", "specialnames", "compound")
  rows = []
  for name in names:
    text = " ".join(topics.topics[name].split())
    sentences = [s for s in text.split(". ") if len(s.split()) > 5][:16]
    rows += [{"text": s, "label": name} for s in sentences]
  rows = rows[::2] + rows[1::2]  # interleave the labels over the splits
  os.makedirs(directory, exist_ok=True)
  for split, part in (("train", rows[:24]), ("dev", rows[24:36]), ("test", rows[36:48])):
    with open(os.path.join(directory, f"{split}.jsonl"), "w", encoding="utf-8") as handle:
      handle.write("\n".join(json.dumps(r) for r in part) + "\n")
  return directory


def test_cli_runs_the_study_end_to_end(tmp_path):
  # The smallest settings that still check every assertion below: half the corpus (the data
  # stage), one fine-tuning batch shape that divides every split (one compiled predict), one
  # dev evaluation per fine-tuning run.
  corpus.write_corpus_files(corpus.python_docs_documents()[:20], str(tmp_path / "text"),
                            num_files=2)
  task_dir = _topic_task(str(tmp_path / "topics"))
  script = os.path.join(os.path.dirname(__file__), "..", "..", "run", "transfer.py")
  out = tmp_path / "study"
  command = [script, f"--input_glob={tmp_path}/text/*.txt",
             f"--task=topics:{task_dir}", "--variants=perm,mlm_no_memory",
             f"--output_dir={out}", "--model_size=tiny", "--vocab_size=400", "--seq_len=32",
             "--reuse_len=16", "--num_predict=5", "--bsz_per_host=4", "--pretrain_steps=4",
             "--pretrain_warmup_steps=1", "--eval_every=2", "--seeds=0",
             "--learning_rates=1e-3", "--finetune_steps=2", "--finetune_batch_size=12",
             "--finetune_eval_every=2", "--max_seq_length=24", "--intrinsic_examples=3",
             "--cloze_distractors=1", "--snapshots=2", "--nojit_compile"]
  result = run_forked(command, timeout=900)
  assert result.returncode == 0, result.stderr[-3000:]
  assert "ETA" in result.stdout
  results = json.load(open(out / "results.json"))
  rows = results["finetuning"]["topics"]
  assert list(rows) == [transfer.RANDOM_INIT, "perm@2", "perm", "mlm_no_memory@2",
                        "mlm_no_memory"]
  # (one seed: a row's median over seeds is test_row_summary_picks_the_rate_by_median_dev...)
  assert all(row["seeds"] == 1 and 0 <= row["test_median"] <= 1 for row in rows.values())
  assert len(results["runs"]) == 5
  curves = {name: [p["step"] for p in record["held_out"]]
            for name, record in results["pretraining"].items()}
  assert curves == {"perm": [0, 2, 4], "mlm_no_memory": [0, 2, 4]}
  mlm_config = json.load(open(out / "pretraining" / "mlm_no_memory" / "pretrained" /
                              "xlnet_config.json"))
  assert mlm_config["mem_len"] == 0
  assert "| random_init |" in (out / "results.md").read_text()
  assert sorted(results["intrinsic"]) == ["mlm_no_memory", "mlm_no_memory@2", "perm", "perm@2"]
  assert sorted(results["intrinsic"]["perm"]) == ["1", "2", "3", "4"]
  assert set(results["intrinsic"]["perm"]["2"]["infilling"]) == set(infilling.ORDERS)
  assert "| perm | 4 |" in (out / "results.md").read_text()
  for png in ("held_out_loss.png", "budget_trend.png"):
    assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
  # The snapshot at step 2 is the run's state then: its backbone differs from the final one.
  snapshot = out / "pretraining" / "perm" / "snapshots" / "2" / "pretrained"
  assert sorted(os.listdir(snapshot)) == sorted(os.listdir(snapshot.parent.parent.parent /
                                                           "pretrained"))
  assert ((snapshot / "model.weights.h5").read_bytes() !=
          (out / "pretraining" / "perm" / "pretrained" / "model.weights.h5").read_bytes())
  assert "| perm | 2 | 0.0 M |" in (out / "results.md").read_text()  # the trend table
  # Run again: everything is kept, nothing retrained.
  again = run_forked(command, timeout=900)
  assert again.returncode == 0, again.stderr[-3000:]
  assert again.stdout.count(": kept") == 5
  assert json.load(open(out / "results.json"))["intrinsic"] == results["intrinsic"]
  # The probes of frozen features read the study's backbones, layer by layer.
  probe = os.path.join(os.path.dirname(__file__), "..", "..", "run", "probe_features.py")
  backbone = out / "pretraining" / "perm" / "pretrained"
  result = run_forked([probe, f"--sp_path={out}/data/base/spiece.model",
                           f"--task_dir={task_dir}", f"--backbones=random,{backbone}",
                           "--max_seq_length=24", "--probe_steps=5"],
                          timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  lines = [line for line in result.stdout.splitlines() if "dev accuracy" in line]
  assert len(lines) == 4
  for line in lines:
    values = json.loads(line.split(": ")[-1])
    assert len(values) == 3 and all(0 <= v <= 1 for v in values)  # embedding + 2 layers


def test_row_summary_picks_the_rate_by_median_dev_and_reports_its_test():
  runs = [{"learning_rate": 1e-4, "dev": d, "test": t} for d, t in ((0.5, 0.9), (0.6, 0.9))]
  runs += [{"learning_rate": 1e-3, "dev": d, "test": t} for d, t in ((0.7, 0.4), (0.8, 0.6))]
  summary = transfer.summarize_row(runs)
  assert summary["learning_rate"] == 1e-3
  assert summary["test_median"] == pytest.approx(0.5)
  assert (summary["test_min"], summary["test_max"]) == (0.4, 0.6)


def test_unknown_variant_settings_are_refused():
  with pytest.raises(ValueError, match="unknown settings"):
    transfer._check_variants({"x": {"mask_prob": 0.2}})


def test_recipe_variants_get_their_own_records_and_bad_values_name_the_setting():
  study = transfer.TransferStudyOptions(output_dir="unused", corpus_files=[], tasks=[])
  assert transfer._data_key({"num_predict": 42, "mem_len": 0}) == (("num_predict", 42),)
  assert study.variant({"num_predict": 42, "max_span_words": 2}).data.num_predict == 42
  with pytest.raises(ValueError, match="num_predict"):
    study.variant({"num_predict": 0})
