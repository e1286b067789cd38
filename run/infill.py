"""`xlnet-infill` from the checkout:
xlnet_tf/cli/infill.py."""

from xlnet_tf.cli import infill

if __name__ == "__main__":
  infill.entry()
