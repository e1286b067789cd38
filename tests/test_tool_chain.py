"""The tools chained as a new user chains them: the installed commands of the wheel, each on
the directory the one before wrote and with no flag to carry what that directory holds
(pretrain -> fine-tune -> export -> serve strings); then the README's Python blocks, run as
written, on directories the tools wrote. Tiny models throughout."""

import csv
import json
import os
import re
import subprocess

import numpy as np
import pytest

from installed_wheel import install_wheel, user_environment
from repository import README
from xlnet_tf import XLNetClassifier

TEXTS = ["the function returns the length of a list.", "a loop repeats the statement.",
         "the cat sat on the mat.", "a dog barked at the mailman."]
LABELS = ["code", "code", "animal", "animal"]
# The main job at its smallest: the embedded corpus, a tiny model, a few steps.
TINY_PRETRAINING = ["--model_size=tiny", "--vocab_size=500", "--seq_len=32",
                    "--train_batch_size=4", "--train_steps=4"]


def run(command, cwd, timeout=600):
  """Runs an installed command (or the venv's python) in `cwd`; its stdout."""
  result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=user_environment())
  assert result.returncode == 0, (command, result.stdout[-2000:], result.stderr[-3000:])
  return result.stdout


@pytest.fixture(scope="module")
def workplace(tmp_path_factory):
  """(the installed venv's bin/, a directory outside the checkout where xlnet-pretrain has
  run with its default --output_dir, pretrain_output)."""
  root = tmp_path_factory.mktemp("chain")
  bin_dir = install_wheel(str(root))
  elsewhere = root / "elsewhere"
  elsewhere.mkdir()
  run([os.path.join(bin_dir, "xlnet-pretrain"), *TINY_PRETRAINING], elsewhere)
  return bin_dir, elsewhere


def test_pretrain_fine_tune_export_and_serve_strings(workplace):
  bin_dir, elsewhere = workplace
  with open(elsewhere / "train.csv", "w", newline="", encoding="utf-8") as handle:
    writer = csv.writer(handle)
    writer.writerow(["text", "label"])
    writer.writerows(list(zip(TEXTS, LABELS)) * 4)
  # The backbone pretraining wrote, its tokenizer with it: no --sp_path, --task_name, --do_*.
  printed = run([os.path.join(bin_dir, "xlnet-classify"), "--train_file=train.csv",
                 "--init_checkpoint=pretrain_output/model/pretrained", "--output_dir=out"],
                elsewhere)
  assert "3 epochs of 16 examples" in printed
  assert {"spiece.model", "labels.json", "preprocessor.json"} <= set(os.listdir(
      elsewhere / "out" / "best"))
  # best/ holds its tokenizer and head: the export needs no --sp_path or --head.
  printed = run([os.path.join(bin_dir, "xlnet-export"), "--model_dir=out/best", "--check"],
                elsewhere)
  assert "serving_default" in printed
  version = elsewhere / "serving" / "xlnet" / "1"
  # TensorFlow alone (with the tokenizer ops of tensorflow_text) serves raw strings.
  served = json.loads(run([os.path.join(bin_dir, "python"), "-c", f"""
import json, tensorflow as tf, tensorflow_text
serve = tf.saved_model.load({str(version)!r}).signatures["serving_default"]
out = serve(text=tf.constant({TEXTS!r}))
print(json.dumps({{"logits": out["logits"].numpy().tolist(),
                  "names": [name.decode() for name in out["predicted_label_name"].numpy()]}}))
"""], elsewhere).strip().splitlines()[-1])
  classifier = XLNetClassifier.from_pretrained(str(elsewhere / "out" / "best"))
  logits = classifier.predict(TEXTS, verbose=0)
  np.testing.assert_allclose(served["logits"], logits, atol=1e-5)
  assert served["names"] == [classifier.labels[index] for index in np.argmax(logits, axis=-1)]
  assert sorted(classifier.labels) == ["animal", "code"]


def readme_python_blocks():
  with open(README, encoding="utf-8") as handle:
    return re.findall(r"```python\n(.*?)```", handle.read(), flags=re.S)


def test_readme_blocks_run_on_what_the_tools_wrote(workplace, monkeypatch):
  """The blocks name the main job's outputs (pretrain_output/), the original release's
  directory (written here by xlnet-convert from the pretrained backbone) and proc_data
  (xlnet-create-pretraining-data's default --save_dir)."""
  bin_dir, elsewhere = workplace
  run([os.path.join(bin_dir, "xlnet-convert"), "--input=pretrain_output/model/pretrained",
       "--output=xlnet_cased_L-12_H-768_A-12", "--output_format=original"], elsewhere)
  run([os.path.join(bin_dir, "xlnet-create-pretraining-data"), "--input_glob=pretrain_output/"
       "data/corpus/train-000.txt", "--sp_path=pretrain_output/data/spiece.model",
       "--bsz_per_host=4", "--num_workers=1"], elsewhere)
  monkeypatch.chdir(elsewhere)
  blocks = readme_python_blocks()
  assert len(blocks) == 6
  namespace = {}
  for block in blocks:
    if "model.fit(" in block:  # the same call, a few steps instead of a thousand
      shortened = block.replace("steps_per_epoch=100, epochs=10", "steps_per_epoch=2, epochs=1")
      assert shortened != block
      block = shortened
    exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102
  d_model = namespace["model"].backbone.config.d_model
  assert namespace["out"]["query_output"].shape == (2, 1, d_model)
  assert namespace["logits"].shape == (2, 2)
  assert namespace["classifier"].labels == ["negative", "positive"]
  assert sorted(os.listdir("my_classifier")) == [
      "head.json", "labels.json", "model.weights.h5", "preprocessor.json", "spiece.model",
      "tokenizer_config.json", "xlnet_config.json"]
  assert namespace["scores"].shape == (2, 2)  # raw strings: fit, evaluate, predict
  assert np.isfinite(namespace["sentiment"].history.history["loss"][-1])
  assert XLNetClassifier.from_pretrained("sentiment").preprocessor.sequence_length == 64
  assert np.isfinite(namespace["model"].history.history["loss"][-1])
  assert set(namespace["batch"]) >= {"input_ids", "perm_mask", "target_mapping", "target"}
  assert namespace["filled"].shape == namespace["blanks"].input_ids.shape
  assert namespace["logp"].shape == (1,) and len(namespace["ranked"]) == 3
