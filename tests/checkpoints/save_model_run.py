"""Saves a tiny classifier (weights drawn from a seed) with save_pretrained, every file this
process writes limited to a size: the kernel kills it (SIGXFSZ) when a write passes that byte,
as a crash at that point of the save would. Run by tests/checkpoints/test_whole_saves.py.

  save_model_run.py DIRECTORY SEED [FILE_SIZE_LIMIT]
"""

import resource
import signal
import sys

import keras
import numpy as np

from xlnet_tf import XLNetClassifier, XLNetConfig

directory, seed = sys.argv[1], int(sys.argv[2])
keras.utils.set_random_seed(seed)
head = XLNetClassifier(XLNetConfig.preset("tiny"), num_classes=2)
head({"input_ids": np.zeros([2, 4], np.int32)})
if len(sys.argv) > 3:
  limit = int(sys.argv[3])
  resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
  signal.signal(signal.SIGXFSZ, signal.SIG_DFL)  # Python ignores it: a write would only fail
head.save_pretrained(directory)
print("saved")
