"""--recompute and --freeze_layers of a classification run (TaskOptions' recompute and
freeze_layers): a run with recompute trains the weights of one without it (dropout on, same
seed), and the embedding, the first blocks and their rows of the stacked per-layer variables
leave the run as the checkpoint had them."""

import keras
import numpy as np
import pytest

from xlnet_tf import XLNetClassifier, XLNetConfig, XLNetModel, checkpoints
from xlnet_tf.modeling.freezing import STACKED_VARIABLES
from xlnet_tf.tasks import FinetuningOptions, ModelSource, run_finetuning
from xlnet_tf.tasks.classification import ClassificationOptions, ClassificationTask
from xlnet_tf.tasks.finetuning import BEST_DIR
from xlnet_tf.text.tokenizer import XLNetTokenizer

ROWS = ["class value,value class,1", "list name,type method,0", "module type,type module,1",
        "return string,number list,0"] * 2


def trained_weights(config, directory):
  model = XLNetClassifier(XLNetModel(config), num_classes=2)
  checkpoints.load_own_checkpoint(model, str(directory / BEST_DIR))
  return {v.path: v.numpy() for v in model.weights}


@pytest.mark.slow
def test_classification_recomputes_and_freezes(sp_model, tmp_path):
  config = XLNetConfig.preset("tiny", n_token=XLNetTokenizer(sp_model).vocab_size)
  keras.utils.set_random_seed(3)
  pretrained = XLNetModel(config)
  checkpoints.save_pretrained(pretrained, str(tmp_path / "pretrained"))
  before = {v.path: v.numpy() for v in pretrained.weights}
  (tmp_path / "train.csv").write_text("text,text_b,label\n" + "\n".join(ROWS) + "\n")
  runs = {}
  for name, recompute in (("stored", False), ("recomputed", True)):
    run_finetuning(ClassificationTask(ClassificationOptions(
        task_name="generic", labels=("0", "1"), train_file=str(tmp_path / "train.csv"),
        model=ModelSource(init_checkpoint=str(tmp_path / "pretrained"), sp_path=sp_model),
        max_seq_length=16, dropout=0.1, dropatt=0.1, freeze_layers=1, recompute=recompute,
        finetuning=FinetuningOptions(train_steps=3, batch_size=4, learning_rate=0.01,
                                     weight_decay=0.1, jit_compile=True, progress="none"),
        output_dir=str(tmp_path / name))))
    runs[name] = trained_weights(config, tmp_path / name)
  for path, value in runs["stored"].items():
    np.testing.assert_allclose(runs["recomputed"][path], value, atol=1e-6, err_msg=path)
  trained = runs["recomputed"]
  for path in ("transformer/word_embedding", "transformer/mask_emb"):
    np.testing.assert_array_equal(trained[path], before[path])
  for name in STACKED_VARIABLES:
    path = f"transformer/{name}"
    np.testing.assert_array_equal(trained[path][0], before[path][0])
    assert (trained[path][1] != before[path][1]).all(), path
  for path in before:
    if "/layer_0/" in path:
      np.testing.assert_array_equal(trained[path], before[path], err_msg=path)
    elif "/layer_1/" in path:
      assert (trained[path] != before[path]).mean() > 0.5, path
