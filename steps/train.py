"""Train a copy of the starting model on one shard; write the trained model and its sample count.

The model is written first and the stats file last: the stats are the commit record, so a model found
without its stats (an attempt that failed in between, whose outputs Argo still saves) is not counted.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from steps.lib.arguments import add_pipeline_flag, positive_float, positive_int, seed
from steps.lib.bounded_json import to_json
from steps.lib.entry_point import run
from steps.lib.errors import StepError
from steps.lib.input_files import require_file
from steps.lib.progress import from_environment
from steps.lib.schedule import round_learning_rate
from steps.lib.shards import read_shard
from steps.lib.staged_outputs import staged_outputs
from steps.lib.storage import open_store
from steps.lib.tensorflow_setup import exit_without_teardown, keep_out_unused_modules

METRICS = ("loss", "accuracy")  # the training metrics kept in the stats file


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m steps.train", description=__doc__)
    parser.add_argument("--shard", type=Path, required=True, help="the shard to train on (.npz)")
    parser.add_argument("--model", type=Path, required=True, help="the starting model (.h5)")
    add_pipeline_flag(parser, "--epochs", "passes over the shard", type=positive_int)
    add_pipeline_flag(parser, "--batch", "samples per gradient step", type=positive_int)
    add_pipeline_flag(parser, "--learning-rate", "Adam's step size in round 1", type=positive_float)
    add_pipeline_flag(
        parser,
        "--final-learning-rate",
        "Adam's step size in the last round, see steps.lib.schedule",
        type=positive_float,
    )
    parser.add_argument("--round", type=positive_int, default=1, help="this round's number, from 1")
    add_pipeline_flag(parser, "--rounds", "how many rounds the run has", type=positive_int)
    add_pipeline_flag(parser, "--seed", "shuffling and dropout seed", type=seed)
    parser.add_argument("--out", type=Path, required=True, help="the trained model to write (.h5)")
    parser.add_argument(
        "--stats-out",
        type=Path,
        required=True,
        help="JSON with the sample count (FedAvg weight) and final training metrics; written last",
    )
    parser.add_argument(
        "--checkpoint-store",
        help="a store (folder or gs://bucket) that outlives this process: a checkpoint goes there "
        "after each epoch, and a restarted trainer resumes from it",
    )
    parser.add_argument("--checkpoint-key", help="the checkpoint's key in --checkpoint-store")
    return parser


def stats(
    samples: int, epochs: int, metrics: dict[str, float], history: dict[str, list[float]] | None
) -> str:
    """The stats file: the final metrics, each epoch's (when known for every epoch), then the epochs
    and, last, the FedAvg weight."""
    kept: dict = {name: float(metrics[name]) for name in METRICS if name in metrics}
    if history is not None and all(len(values) == epochs for values in history.values()):
        kept["history"] = history
    return to_json({**kept, "epochs": epochs, "samples": samples})


def main(args: argparse.Namespace) -> None:
    with staged_outputs() as outputs:  # renamed in this order: the model, then its stats
        model_out = outputs.file(args.out)
        stats_out = outputs.file(args.stats_out)
        shard = read_shard(args.shard)
        require_file(args.model, "starting model")

        from steps.lib.keras_model import (
            BatchProgress,
            EpochLogger,
            compile_model,
            diverged,
            keras,
            load_model,
            training_batches,
            write_model,
        )

        if args.round > args.rounds:
            raise StepError(f"--round {args.round} is past --rounds {args.rounds}")
        learning_rate = round_learning_rate(
            args.learning_rate,
            args.final_learning_rate,
            args.round,
            args.rounds,
        )
        keras.utils.set_random_seed(args.seed)
        model = compile_model(load_model(args.model), learning_rate)
        logger = EpochLogger(args.epochs, stream=sys.stdout)  # the epochs, for people watching
        callbacks: list[keras.callbacks.Callback] = [logger]
        done, final, every_epoch = 0, {}, True  # every_epoch: the logger holds each epoch done
        if args.checkpoint_store and args.checkpoint_key:
            from steps.lib.checkpoint import StoreCheckpoint, fingerprint

            inputs = fingerprint(
                args.shard, args.model, f"{args.epochs} {args.batch} {learning_rate}"
            )
            checkpoint = StoreCheckpoint(
                open_store(args.checkpoint_store),
                args.checkpoint_key,
                inputs,
                args.epochs,
                history=lambda: logger.history if every_epoch else None,
            )
            checkpoint.set_model(model)
            resumed = checkpoint.resume()
            if resumed:
                done, final = resumed.epochs_done, resumed.logs
                every_epoch = resumed.history is not None
                logger.history = resumed.history or logger.history
            if done:
                print(
                    f"resuming from checkpoint: {done} epoch(s) done, starting at epoch {done + 1}",
                    file=sys.stderr,
                    flush=True,
                )
            callbacks.append(checkpoint)
        batches = math.ceil(len(shard) / args.batch)
        progress = from_environment(args.epochs * batches, done * batches)
        if progress:
            callbacks.append(BatchProgress(progress, batches))
        print(
            f"training on {args.shard} ({len(shard)} samples), {args.epochs} epoch(s), "
            f"batch {args.batch}, learning rate {learning_rate:.3g} (round {args.round} of "
            f"{args.rounds})",
            file=sys.stderr,
            flush=True,
        )
        if done < args.epochs:
            history = model.fit(
                training_batches(shard, args.batch, args.seed),
                initial_epoch=done,
                epochs=args.epochs,
                shuffle=False,  # the batches come shuffled
                verbose=0,
                callbacks=callbacks,
            )
            final = {name: float(values[-1]) for name, values in history.history.items()}
        elif progress:
            progress.finish()
        final = {name: value for name, value in final.items() if name in METRICS}
        if diverged(final, model):
            raise StepError(
                f"training diverged on {args.shard}: its loss or weights became NaN or infinite; "
                "try a smaller --learning-rate"
            )
        write_model(model, model_out)
        history = logger.history if every_epoch else None
        stats_out.write_text(stats(len(shard), args.epochs, final, history))
    print(f"trained model → {args.out}", file=sys.stderr)


if __name__ == "__main__":
    keep_out_unused_modules()
    exit_without_teardown(run(main, make_parser()))
