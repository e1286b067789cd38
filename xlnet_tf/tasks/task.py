"""A fine-tuning task: what one family adds to the one loop (tasks.finetuning), as the Model
Garden's tasks do. Its options (a frozen TaskOptions subclass, holding the FinetuningOptions
tree), its data (the splits read and encoded), its head over the pretrained backbone, its loss,
its dev evaluation with its post-processing, and the files it writes.

tasks.finetuning_run.run_finetuning drives any task from the start to the end of a run, calling
the methods below in the order they are listed. The families: classification.
ClassificationTask (also regression, multi-label, long documents), squad.SquadTask,
race.RaceTask, tagging.TaggingTask.
"""

import dataclasses
import os
from typing import Callable, Dict, Optional, Sequence

import keras
import tensorflow as tf

from xlnet_tf.config import XLNetConfig
from xlnet_tf.tasks.finetuning import BEST_DIR, FinetuningOptions, finetune
from xlnet_tf.tasks.pretrained_model import ModelSource
from xlnet_tf.text.tokenizer import XLNetTokenizer
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.utils.json_files import write_json

# The run settings a resumed run may change (dotted paths in the options tree): where it writes
# and shows what it does, how it is distributed and compiled (the update is the same under any
# strategy), and what it does after training. Every other setting, the training length
# included (the learning rate decays to the last step), must be the recorded one.
OPERATIONAL_FIELDS = ("output_dir", "do_eval", "do_predict", "finetuning.summary_dir",
                      "finetuning.checkpoint_dir", "finetuning.progress", "finetuning.save_steps",
                      "finetuning.jit_compile", "finetuning.runtime.strategy",
                      "finetuning.runtime.tpu", "finetuning.runtime.cpu_replicas")


@dataclasses.dataclass(frozen=True, kw_only=True)
class TaskOptions:
  """What every task's options hold (a task's own options add its files and settings).

  Attributes:
    finetuning: the FinetuningOptions tree (steps or epochs, batch, optimizer, evaluation,
      runtime, checkpoints).
    output_dir: where the run writes best/ (the best weights), its metrics and predictions.
    model: where the backbone comes from (ModelSource).
    do_train: train, evaluating on dev as it goes when the task has dev data.
    do_eval: evaluate the kept weights on dev.
    do_predict: predict the test data. A run without do_train takes the weights a training
      run left in output_dir/best.
    max_seq_length: tokens per sequence.
    recompute: recompute each block in the backward pass (less memory, a third more compute).
    freeze_layers: do not train the embedding and the first N blocks (None: train everything).
  """
  finetuning: FinetuningOptions
  output_dir: str
  model: ModelSource = dataclasses.field(default_factory=ModelSource)
  do_train: bool = True
  do_eval: bool = False
  do_predict: bool = False
  max_seq_length: int = 128
  recompute: bool = False
  freeze_layers: Optional[int] = None


class FinetuningTask:
  """One family's part of a fine-tuning run; subclasses fill in the methods that raise
  NotImplementedError.

  Attributes:
    options: the task's options (a TaskOptions subclass).
    metric: the dev score (higher is better) the best weights are kept by.
    training_rows: what one training row is, for the line saying the training length.
    sequences_per_example: sequences a row holds (a multiple-choice question's options), for
      the attention-size check.
    operational_fields: the task's settings a resumed run may change, besides
      OPERATIONAL_FIELDS.
  """
  metric = "accuracy"
  training_rows = "examples"
  sequences_per_example = 1
  operational_fields: Sequence[str] = ()

  def __init__(self, options: TaskOptions):
    self.options = options

  @property
  def best_dir(self) -> str:
    """Where the best weights are kept: output_dir/best."""
    return os.path.join(self.options.output_dir, BEST_DIR)

  def output_path(self, name: str) -> str:
    """The file `name` in the output directory."""
    return os.path.join(self.options.output_dir, name)

  def check(self) -> None:
    """Refuses, in one line, settings no run can use, before anything is read."""

  def config_overrides(self) -> Dict[str, object]:
    """Run-time options of the backbone's config the task sets (dropout, ...)."""
    return {}

  def prepare(self, config: XLNetConfig) -> XLNetConfig:
    """The backbone's config for this run, checked against the task's settings."""
    return config

  def load_data(self, tokenizer: XLNetTokenizer) -> None:
    """Reads and encodes the splits the run needs, saying what each used and skipped."""
    raise NotImplementedError

  def train_examples(self) -> int:
    """The rows of the training split."""
    raise NotImplementedError

  def build_head(self, backbone) -> keras.Model:
    """The task's head over `backbone` (under the strategy's scope)."""
    raise NotImplementedError

  def train_dataset(self, options: FinetuningOptions) -> tf.data.Dataset:
    """The training batches, a seeded shuffle, repeated."""
    raise NotImplementedError

  def loss(self) -> Optional[keras.losses.Loss]:
    """The training loss of (labels, outputs); None: the head's own."""
    return None

  def evaluator(self, model, batch_size: int) -> Optional[Callable[[], Dict[str, float]]]:
    """A function scoring `model` on dev (None: no dev data to score)."""
    raise NotImplementedError

  def train(self, model, options: FinetuningOptions, progress_stream=None) -> Dict:
    """Fine-tunes `model` (finetuning.finetune), keeping the best weights in best_dir;
    returns finetune's result."""
    return finetune(model, self.train_dataset(options), options,
                    evaluate=self.evaluator(model, options.batch_size), metric=self.metric,
                    best_dir=self.best_dir, loss=self.loss(), progress_stream=progress_stream)

  def history(self, result: Dict):
    """What train_history.json holds of a training run's `result`."""
    return result

  def best_line(self, result: Dict) -> Optional[str]:
    """The line saying the best dev score of a training run (None: none to say)."""
    best = result["best"]
    if not best:
      return None
    return f"Best dev {self.metric} {best[self.metric]:.4f} at step {best['step']}"

  def write_outputs(self, model) -> Dict:
    """Evaluates (do_eval) and predicts (do_predict) with the kept weights, writing their files
    in the output directory; returns what it computed."""
    raise NotImplementedError

  def write_json(self, name: str, value) -> str:
    """Writes `value` as output_dir/`name`, whole; returns its path."""
    return write_json(self.output_path(name), value)


def require_files(options, file_of_action: Dict[str, str]) -> None:
  """Each action asked for needs its file: {"do_train": "train_file", ...} (field names, as
  the commands' flags)."""
  for action, file_field in file_of_action.items():
    if getattr(options, action) and not getattr(options, file_field):
      raise UserInputError(f"--{action} needs --{file_field}")
