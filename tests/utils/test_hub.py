"""A name that is no local directory: a hub id is asked of the hub once, with a short timeout,
so a hub out of reach fails in seconds with one line; a name that reads as a local path is
never looked up there."""

import os
import subprocess
import sys
import time

import pytest

from cli_output import run_tool
from xlnet_tf.utils import hub

# A port nothing listens on: the connection is refused at once, with or without a network.
CLOSED_HUB = "http://127.0.0.1:9"

_LOOKUP = """import sys
from xlnet_tf.utils import hub
try:
  hub.local_directory(sys.argv[1], lambda names: list(names), "weights")
except FileNotFoundError as error:
  print(error)
"""


def hub_out_of_reach(tmp_path):
  """The variables of a process whose hub is a closed port, online, with an empty cache."""
  return {"HF_ENDPOINT": CLOSED_HUB, "HF_HUB_OFFLINE": "0", "HF_HOME": str(tmp_path / "hf_home"),
          "HF_HUB_CACHE": str(tmp_path / "hf_home" / "hub")}


def training_file(tmp_path):
  path = tmp_path / "train.csv"
  path.write_text("text,label\nclass value,1\nlist name,0\n")
  return path


def test_a_hub_id_out_of_reach_fails_at_once_without_retries(tmp_path):
  """huggingface_hub reads HF_ENDPOINT when imported: a process of its own (without
  TensorFlow, the lookup alone)."""
  started = time.monotonic()
  result = subprocess.run([sys.executable, "-c", _LOOKUP, "hf_clz"], capture_output=True,
                          text=True, timeout=60,
                          env={**os.environ, **hub_out_of_reach(tmp_path)})
  elapsed = time.monotonic() - started
  assert result.returncode == 0 and result.stderr == "", result.stderr[-2000:]  # no retry lines
  assert result.stdout.splitlines() == [
      f"hf_clz: no such directory, and no snapshot of that Hugging Face hub id in the cache "
      f"{tmp_path}/hf_home/hub (the hub is out of reach: [Errno 111] Connection refused); "
      "expected a directory holding weights, or a hub id"]
  assert elapsed < 5, elapsed


def test_a_command_given_a_hub_id_out_of_reach_ends_in_one_line(tmp_path):
  """A fresh interpreter: the forking server's huggingface_hub has read its own HF_ENDPOINT."""
  result = run_tool("run/classifier.py", "--init_checkpoint=hf_clz",
                    f"--train_file={training_file(tmp_path)}",
                    f"--output_dir={tmp_path}/out", fresh_process=True,
                    extra_environment=hub_out_of_reach(tmp_path))
  assert result.returncode == 1, result.stderr[-2000:]
  lines = result.stderr.splitlines()
  assert len(lines) == 1 and lines[0].startswith(
      "error: hf_clz: no such directory, and no snapshot of that Hugging Face hub id"), lines
  assert "out of reach: [Errno 111] Connection refused" in lines[0]
  assert not (tmp_path / "out").exists()


LOCAL_LOOKING = ["./model", "../model", "/absent/model", "~/model", "models/xlnet/base",
                 "xlnet_model.ckpt", "weights.h5", "org/model.safetensors"]


@pytest.mark.parametrize("name", LOCAL_LOOKING)
def test_a_name_that_reads_as_a_local_path_is_never_asked_of_the_hub(name, monkeypatch):
  def asked(*arguments):
    raise AssertionError(f"the hub was asked for {name}")
  monkeypatch.setattr(hub, "_hub_snapshot", asked)
  assert not hub.is_hub_id(name)
  with pytest.raises(FileNotFoundError) as raised:
    hub.local_directory(name, list, "weights")
  assert str(raised.value) == f"{name}: no such directory; expected a directory holding weights"


@pytest.mark.parametrize("name", ["hf_clz", "xlnet/xlnet-base-cased", "org/model-1.5",
                                  "EleutherAI/gpt-neo-1.3B"])
def test_hub_ids_stay_hub_ids(name):
  assert hub.is_hub_id(name)


@pytest.mark.parametrize("name", ["./model", "xlnet_model.ckpt", "models/xlnet/base"])
def test_the_commands_say_a_local_path_is_not_there(name, tmp_path):
  """The hub not asked, the answer does not depend on the network (the forking server's hub
  is whatever its environment said)."""
  result = run_tool("run/classifier.py", f"--init_checkpoint={name}",
                    f"--train_file={training_file(tmp_path)}", f"--output_dir={tmp_path}/out")
  assert result.returncode == 1, result.stderr[-2000:]
  assert result.stderr.splitlines() == [
      f"error: {name}: no such directory; expected a directory holding xlnet_tf's own files "
      "(xlnet_config.json + model.weights.h5), Hugging Face's (config.json + model.safetensors, "
      "pytorch_model.bin or tf_model.h5) or the original's (xlnet_config.json + a TF1 "
      "checkpoint xlnet_model.ckpt.index/.data-*, or that checkpoint's prefix "
      "DIR/xlnet_model.ckpt)"]
