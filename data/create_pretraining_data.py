"""`xlnet-create-pretraining-data` from the checkout:
xlnet_tf/cli/create_pretraining_data.py."""

from xlnet_tf.cli import create_pretraining_data

if __name__ == "__main__":
  create_pretraining_data.entry()
