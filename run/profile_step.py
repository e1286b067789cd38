"""`xlnet-profile-step` from the checkout:
xlnet_tf/cli/profile_step.py."""

from xlnet_tf.cli import profile_step

if __name__ == "__main__":
  profile_step.entry()
