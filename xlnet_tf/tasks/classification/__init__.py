"""Sequence classification and regression (GLUE, IMDB, generic files; multi-label): readers
by header name, label ids, encoding and long documents, training, metrics, and the task a run
drives (ClassificationOptions, ClassificationTask)."""

from xlnet_tf.tasks.classification.task import (GENERIC_TASK, ClassificationOptions,
                                                ClassificationTask, TaskData, TaskDataOptions,
                                                build_classifier, classifier_head,
                                                encode_examples, encode_long_documents,
                                                load_task, predict_logits, task_loss,
                                                task_metrics, task_name_for, train_classifier,
                                                write_predictions)

__all__ = ["GENERIC_TASK", "ClassificationOptions", "ClassificationTask", "TaskData",
           "TaskDataOptions", "build_classifier", "classifier_head", "encode_examples",
           "encode_long_documents", "load_task", "predict_logits", "task_loss", "task_metrics",
           "task_name_for", "train_classifier", "write_predictions"]
