"""`xlnet-export` from the checkout:
xlnet_tf/cli/export.py."""

from xlnet_tf.cli import export

if __name__ == "__main__":
  export.entry()
