"""What the README's fine-tuning example does, on a tiny classifier, in a process of its own:
fit on a dataset of strings, predict, quantize("int8"), predict again at other batch sizes.
Prints what it checked on its last line; its warnings go to stderr. Run by
tests/heads/test_keras_api.py (which checks decoding's functions in its own process).

  warnings_run.py SPIECE_MODEL
"""

import sys
import warnings

import keras
import numpy as np
import tensorflow as tf

from xlnet_tf import XLNetClassifier, XLNetConfig, XLNetModel, XLNetPreprocessor, XLNetTokenizer

# Shown as the messages looked for are: the test checks that both kinds reach stderr.
tf.get_logger().warning("probe: triggered tf.function retracing")
warnings.warn("probe: Gradients do not exist", stacklevel=1)

tokenizer = XLNetTokenizer(sys.argv[1], lower=True)
config = XLNetConfig.preset("tiny", n_token=tokenizer.vocab_size, dropout=0.0, dropatt=0.0)
texts = ["A fine film.", "Dull and long.", "Loved every minute.", "I left early."]
keras.utils.set_random_seed(1)
sentiment = XLNetClassifier(XLNetModel(config), num_classes=2)
sentiment.preprocessor = XLNetPreprocessor(tokenizer, sequence_length=16)
mask_emb = sentiment.backbone.mask_emb.numpy()
train = tf.data.Dataset.from_tensor_slices((texts, [1, 0, 1, 0])).batch(2)
# Keras' Adam, no XLA: the warnings of the project's optimizer under XLA, in less time.
sentiment.compile(optimizer=keras.optimizers.Adam(2e-3), metrics=["accuracy"],
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  jit_compile=False)
sentiment.fit(train, epochs=1, verbose=0)
assert (sentiment.backbone.mask_emb.numpy() == mask_emb).all()
logits = sentiment.predict(texts, verbose=0)
sentiment.quantize("int8")
for count in (4, 3, 1):  # the second traces for any batch size (reduce_retracing)
  quantized = sentiment.predict(texts[:count], verbose=0)
  assert np.abs(quantized - logits[:count]).max() < 0.1 * np.abs(logits).max() + 1e-3
print("mask_emb unchanged, quantized logits close")
