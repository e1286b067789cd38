"""Every XLNet class next to transformers' class for it: tiny models with random weights,
batches that exercise padding and segments, and the outputs of both by one set of names."""

import numpy as np
import pytest

from model_inputs import padded_pair_batch, tiny_config
from xlnet_reference import randomize_weights
import xlnet_tf
from xlnet_tf import XLNetModel

CONFIG = tiny_config()
BATCH, LENGTH, CHOICES = 3, 8, 2
# name: (our class, its arguments, transformers' class)
MODELS = {
    "backbone": ("XLNetModel", {}, "XLNetModel"),
    "lm": ("XLNetPretrainer", {}, "XLNetLMHeadModel"),
    "classifier": ("XLNetClassifier", {"num_classes": 3}, "XLNetForSequenceClassification"),
    "regression": ("XLNetClassifier", {"num_classes": 1, "summary_type": "mean"},
                   "XLNetForSequenceClassification"),
    "multiple_choice": ("XLNetMultipleChoice", {"summary_type": "first"},
                        "XLNetForMultipleChoice"),
    "token_classifier": ("XLNetTokenClassifier", {"num_labels": 4},
                         "XLNetForTokenClassification"),
    "question_answering": ("XLNetQuestionAnswering", {"start_n_top": 2, "end_n_top": 2},
                           "XLNetForQuestionAnswering"),
}


def build(kind, config=CONFIG, seed=0, **overrides):
  class_name, arguments, _ = MODELS[kind]
  backbone = XLNetModel(config)
  model = backbone if class_name == "XLNetModel" else getattr(xlnet_tf, class_name)(
      backbone, **{**arguments, **overrides})
  randomize_weights(model, seed)
  return model


def inputs_for(kind, rng):
  """Batch 3, left padding of 0/2/1, segments A, B and <cls>; [B, C, T] for multiple choice,
  p_mask (question and padding blocked) and cls_index for question answering."""
  if kind == "multiple_choice":
    flat = padded_pair_batch(rng, BATCH * CHOICES, LENGTH, CONFIG.n_token,
                             pad_lengths=[0, 2, 1, 3, 0, 1])
    return {key: value.reshape(BATCH, CHOICES, LENGTH) for key, value in flat.items()}
  batch = padded_pair_batch(rng, BATCH, LENGTH, CONFIG.n_token, pad_lengths=[0, 2, 1])
  if kind == "question_answering":
    p_mask = np.where(batch["segment_ids"] == 0, 0.0, 1.0).astype(np.float32)
    p_mask[:, -1] = 0.0  # <cls>: "no answer"
    batch.update(p_mask=p_mask, cls_index=np.full([BATCH], LENGTH - 1, np.int32))
  return batch


def outputs_of(model, kind, batch):
  """Our outputs as NumPy arrays, by the names the comparisons below use."""
  if kind == "backbone":
    return {"hidden": model(batch)["sequence_output"].numpy()}
  if kind == "lm":
    hidden = model.backbone(batch)["sequence_output"]
    return {"logits": model.lm_logits(hidden).numpy()}
  outputs = model(batch)
  if isinstance(outputs, dict):
    return {key: value.numpy() for key, value in outputs.items()}
  return {"logits": outputs.numpy()}


def transformers_outputs(kind, directory, batch):
  """(loading info, outputs by our names) of transformers' class for `kind` on `batch`."""
  torch = pytest.importorskip("torch")
  transformers = pytest.importorskip("transformers")
  hf_class = getattr(transformers, MODELS[kind][2])
  model, info = hf_class.from_pretrained(str(directory), output_loading_info=True)
  model.eval()
  tensors = {key: torch.tensor(value) for key, value in batch.items()}
  arguments = dict(input_ids=tensors["input_ids"].long(),
                   token_type_ids=tensors["segment_ids"].long(),
                   attention_mask=tensors["input_mask"])
  if kind == "question_answering":
    arguments.update(p_mask=tensors["p_mask"], cls_index=tensors["cls_index"].long())
  with torch.no_grad():
    result = model(**arguments)
  if kind == "backbone":
    return info, {"hidden": result.last_hidden_state.numpy()}
  if kind != "question_answering":
    logits = result.logits.numpy()
    return info, {"logits": logits[:, 0] if kind == "regression" else logits}
  # transformers' "log_probs" are probabilities; its end candidates are laid out [B, E, K].
  ends = [getattr(result, name).numpy().reshape(BATCH, 2, 2).transpose(0, 2, 1)
          for name in ("end_top_log_probs", "end_top_index")]
  return info, {"start_top_log_probs": np.log(result.start_top_log_probs.numpy()),
                "start_top_index": result.start_top_index.numpy(),
                "end_top_log_probs": np.log(ends[0]), "end_top_index": ends[1],
                "cls_logits": result.cls_logits.numpy()}
