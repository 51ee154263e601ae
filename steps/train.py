"""Train a copy of the starting model on one shard; write the trained model and its sample count."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from steps.cli import StepError, positive_float, positive_int, require_file, run, write_text
from steps.dataset import read_shard
from steps.storage import open_store


def parse_args() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m steps.train", description=__doc__)
    parser.add_argument("--shard", type=Path, required=True, help="the shard to train on (.npz)")
    parser.add_argument("--model", type=Path, required=True, help="the starting model (.h5)")
    parser.add_argument("--epochs", type=positive_int, default=1, help="passes over the shard")
    parser.add_argument("--batch", type=positive_int, default=64, help="samples per gradient step")
    parser.add_argument("--learning-rate", type=positive_float, default=1e-3, help="Adam step size")
    parser.add_argument("--seed", type=int, default=0, help="shuffling and dropout seed")
    parser.add_argument("--out", type=Path, required=True, help="the trained model to write (.h5)")
    parser.add_argument(
        "--stats-out",
        type=Path,
        required=True,
        help="JSON with the sample count (FedAvg weight) and final training metrics",
    )
    parser.add_argument(
        "--checkpoint-store",
        help="a store (folder or gs://bucket) that outlives this process: a checkpoint goes there "
        "after each epoch, and a restarted trainer resumes from it",
    )
    parser.add_argument("--checkpoint-key", help="the checkpoint's key in --checkpoint-store")
    return parser


def main(args: argparse.Namespace) -> None:
    shard = read_shard(args.shard)
    require_file(args.model, "starting model")

    import keras

    from steps.model import EpochLogger, compile_model, load_model, save_model, to_inputs

    keras.utils.set_random_seed(args.seed)
    model = compile_model(load_model(args.model), args.learning_rate)
    callbacks: list[keras.callbacks.Callback] = [EpochLogger(args.epochs)]
    done, final = 0, {}
    if args.checkpoint_store and args.checkpoint_key:
        from steps.checkpoint import StoreCheckpoint, fingerprint

        inputs = fingerprint(
            args.shard, args.model, f"{args.epochs} {args.batch} {args.learning_rate}"
        )
        checkpoint = StoreCheckpoint(open_store(args.checkpoint_store), args.checkpoint_key, inputs)
        checkpoint.set_model(model)
        done, final = checkpoint.resume() or (0, {})
        if done:
            print(
                f"resuming from checkpoint: {done} epoch(s) done, starting at epoch {done + 1}",
                file=sys.stderr,
                flush=True,
            )
        callbacks.append(checkpoint)
    print(
        f"training on {args.shard} ({len(shard)} samples), {args.epochs} epoch(s), "
        f"batch {args.batch}",
        file=sys.stderr,
        flush=True,
    )
    if done < args.epochs:
        history = model.fit(
            to_inputs(shard.x),
            shard.y,
            initial_epoch=done,
            epochs=args.epochs,
            batch_size=args.batch,
            verbose=0,
            callbacks=callbacks,
        )
        final = {name: float(values[-1]) for name, values in history.history.items()}
    if any(value != value for value in final.values()):  # NaN: diverged
        raise StepError(
            f"training diverged on {args.shard} (metrics {final}); try a smaller --learning-rate"
        )
    save_model(model, args.out)
    write_text(args.stats_out, json.dumps({"samples": len(shard), "epochs": args.epochs, **final}))
    print(f"trained model → {args.out}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(run(main, parse_args()))
