"""The model a tool starts from, read as xlnet_tf/cli/pretrained_flags.py reads it: a directory
in any layout or a Hugging Face hub id, its tokenizer with it. run/classifier.py
(--init_checkpoint) and run/generate.py (--model_dir) resolve a hub id from huggingface_hub's
cache, offline; the LM tools' bad model flags end in one line naming them."""

import shutil

import keras
import numpy as np
import pytest

from checkpoint_files import HUB_COMMIT, write_hub_cache
from cli_output import run_tool
from xlnet_tf import XLNetConfig, XLNetModel, XLNetPretrainer
from xlnet_tf.checkpoints.huggingface_writer import save_huggingface_checkpoint
from xlnet_tf.text.tokenizer import XLNetTokenizer
from xlnet_tf.utils.json_files import write_json

HUB_ID = "xlnet-tests/tiny-lm"


@pytest.fixture(scope="module")
def model_files(tmp_path_factory, sp_model):
  """A tiny Hugging Face XLNetLMHeadModel with its tokenizer, in a directory and in an offline
  hub cache; its LM bias favours one token by far, so greedy generation repeats it. Beside
  them, directories the LM tools refuse, a classification task and held-out text."""
  root = tmp_path_factory.mktemp("model_flags")
  tokenizer = XLNetTokenizer(sp_model)
  keras.utils.set_random_seed(0)
  lm = XLNetPretrainer(XLNetModel(XLNetConfig.preset("tiny", n_token=tokenizer.vocab_size)))
  token = tokenizer.encode("loop")[-1]
  lm.lm_bias.assign(np.eye(tokenizer.vocab_size, dtype=np.float32)[token] * 50.0)
  directory = root / "lm"
  save_huggingface_checkpoint(lm, str(directory))
  shutil.copy(sp_model, directory / "spiece.model")
  write_json(str(directory / "tokenizer_config.json"), {"do_lower_case": False})
  write_hub_cache(root / "hf_home" / "hub", HUB_ID, sorted(directory.iterdir()))
  # Refused: a BERT directory, a backbone alone, an LM of 100 token ids.
  (root / "bert").mkdir()
  write_json(str(root / "bert" / "bert_config.json"), {"hidden_size": 32})
  (root / "bert" / "vocab.txt").write_text("[PAD]\n[UNK]\n")
  backbone = XLNetModel(XLNetConfig.preset("tiny", n_token=tokenizer.vocab_size))
  small_lm = XLNetPretrainer(XLNetModel(XLNetConfig.preset("tiny", n_token=100)))
  for name, model in (("backbone", backbone), ("small", small_lm)):
    model({"input_ids": np.zeros([1, 4], np.int32),
           "target_mapping": np.eye(4, dtype=np.float32)[None, :1]})
    model.save_pretrained(str(root / name))
  (root / "test.csv").write_text("text\nclass value\nlist name\nmodule type\n")
  (root / "held_out.txt").write_text("Use the break statement to leave a loop.\n")
  return {"root": root, "continuation": tokenizer.decode([token] * 3),
          "environment": {"HF_HOME": str(root / "hf_home"),
                          "HF_HUB_CACHE": str(root / "hf_home" / "hub"), "HF_HUB_OFFLINE": "1"}}


def test_classifier_and_generate_start_from_a_hub_id(model_files, tmp_path):
  """The hub id alone: config, format, tokenizer and weights from the cached snapshot;
  generation reads the LM head's weights (the bias's token), the classifier's predictions
  equal those from the directory itself."""
  root, environment = model_files["root"], model_files["environment"]
  generated = run_tool("run/generate.py", f"--model_dir={HUB_ID}", "--prompt=A list",
                       "--max_new_tokens=3", f"--output_dir={tmp_path / 'none'}",
                       extra_environment=environment)
  assert generated.returncode == 0, generated.stderr[-3000:]
  assert f"continuation: {model_files['continuation']}\n" in generated.stdout
  predictions, logs = {}, {}
  for source in (HUB_ID, root / "lm"):
    output_dir = tmp_path / ("hub" if source == HUB_ID else "directory")
    result = run_tool("run/classifier.py", f"--init_checkpoint={source}", "--task_name=generic",
                      "--regression", f"--test_file={root / 'test.csv'}", "--do_predict",
                      "--max_seq_length=16", "--train_batch_size=4", "--nojit_compile",
                      f"--output_dir={output_dir}", "--verbose",  # the loader's INFO line
                      extra_environment=environment)
    assert result.returncode == 0, result.stderr[-3000:]
    predictions[source] = (output_dir / "generic_test_predictions.tsv").read_text()
    logs[source] = result.stderr
  snapshot = root / "hf_home" / "hub" / "models--xlnet-tests--tiny-lm" / "snapshots" / HUB_COMMIT
  assert f"Backbone from {snapshot}: " in logs[HUB_ID], logs[HUB_ID][-3000:]
  assert predictions[HUB_ID] == predictions[root / "lm"]
  assert len(predictions[HUB_ID].splitlines()) == 4


LM_TOOLS = {"run/generate.py": [], "run/infill.py": [],
            "run/evaluate_lm.py": ["--input_glob={root}/held_out.txt", "--speed_lengths="]}
LM_CASES = {
    # case: (flags, the one line after "error: "); --output_dir holds nothing to fall back on
    "no such directory": (["--model_dir={root}/none"],
                          "{root}/none: no such directory; expected a directory holding"),
    "no known layout": (["--model_dir={root}/bert"], "{root}/bert: not a pretrained XLNet "
                        "directory; expected"),
    "--sp_path contradicts the model": (
        ["--model_dir={root}/small", "--sp_path={sp}"],
        "{sp}: {pieces} SentencePiece pieces, but the model's n_token is 100 "
        "(--model_dir={root}/small)"),
    "a weights file as --sp_path": (
        ["--model_dir={root}/lm", "--sp_path={root}/lm/model.safetensors"],
        "{root}/lm/model.safetensors: not a readable SentencePiece model"),
    "a backbone alone": (["--model_dir={root}/backbone", "--sp_path={sp}"],
                         "--model_dir={root}/backbone holds a backbone only, not a language "
                         "model"),
}


@pytest.mark.parametrize("case", sorted(LM_CASES))
@pytest.mark.parametrize("script", sorted(LM_TOOLS))
def test_lm_tools_refuse_a_bad_model_in_one_line(model_files, sp_model, script, case, tmp_path):
  values = dict(root=model_files["root"], sp=sp_model, pieces=XLNetTokenizer(sp_model).vocab_size)
  flags, expected = LM_CASES[case]
  result = run_tool(script, f"--output_dir={tmp_path / 'out'}",
                    *[flag.format(**values) for flag in LM_TOOLS[script] + flags])
  assert result.returncode == 1, result.stderr[-2000:]
  lines = result.stderr.splitlines()
  assert len(lines) == 1 and lines[0].startswith("error: " + expected.format(**values)), lines
