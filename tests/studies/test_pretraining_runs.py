"""A study's pretraining run (studies.pretraining_runs): snapshots along one run, and a run
that dies between two snapshots resumes to the backbones of an uninterrupted one."""

import keras
import numpy as np
import pytest

from xlnet_tf import XLNetModel
from xlnet_tf.pretraining import recipes
from xlnet_tf.studies import pretraining_runs


def _recipe():
  return recipes.FROM_TEXT.replace(model_size="tiny", seq_len=32, reuse_len=16, num_predict=6,
                                   bsz_per_host=4, bi_data=True, train_steps=6,
                                   warmup_steps=1, learning_rate=1e-2, eval_every=2,
                                   jit_compile=False)


def _weights(directory):
  return [w.numpy() for w in XLNetModel.from_pretrained(str(directory)).weights]


def test_a_run_killed_between_snapshots_resumes_to_the_same_backbones(small_data, tmp_path,
                                                                     monkeypatch):
  recipe = _recipe()
  data = {"train": small_data["bi"], "valid": small_data["bi"]}
  config = pretraining_runs.model_config(recipe, n_token=500)
  keras.utils.set_random_seed(0)
  straight = pretraining_runs.pretrain(recipe, config, data, str(tmp_path / "straight"),
                                       [2, 4, 6])
  assert sorted(straight["snapshots"]) == ["2", "4"] and straight["steps"] == 6
  assert [point["step"] for point in straight["held_out"]] == [0, 2, 4, 6]
  # Dies after the checkpoint at step 4, while copying that snapshot.
  copies = []
  real_copy = pretraining_runs.shutil.copytree

  def dying_copy(source, target, **kwargs):
    copies.append(target)
    if "/4/" in target + "/":
      raise KeyboardInterrupt("killed")
    return real_copy(source, target, **kwargs)

  monkeypatch.setattr(pretraining_runs.shutil, "copytree", dying_copy)
  keras.utils.set_random_seed(0)
  with pytest.raises(KeyboardInterrupt):
    pretraining_runs.pretrain(recipe, config, data, str(tmp_path / "killed"), [2, 4, 6])
  monkeypatch.setattr(pretraining_runs.shutil, "copytree", real_copy)
  keras.utils.set_random_seed(7)  # another init: the checkpoint is restored anyway
  resumed = pretraining_runs.pretrain(recipe, config, data, str(tmp_path / "killed"),
                                      [2, 4, 6])
  for step in ("2", "4"):
    for ours, theirs in zip(_weights(resumed["snapshots"][step]["backbone"]),
                            _weights(straight["snapshots"][step]["backbone"])):
      np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-6)
  final = [_weights(tmp_path / name / "pretrained") for name in ("killed", "straight")]
  for ours, theirs in zip(*final):
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-6)
  assert np.abs(final[0][0] - _weights(resumed["snapshots"]["2"]["backbone"])[0]).max() > 1e-4
