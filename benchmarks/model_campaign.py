"""The long profile of the services model test (tests/test_services_model.py): more examples, longer runs.

    python benchmarks/model_campaign.py --examples 200 --steps 30 --seed 1 [--machine mor_lsm_tree ...]

Runs each machine (MOR `lsm_tree`, MOR `default`, COW, CDC: the same classes
`make test` runs with a bounded profile) under `run_state_machine_as_test`
with the given settings and seed, and prints per machine: examples run,
steps, failures (with Hypothesis' shrunk failing example) and time; then the
rules (and their variants) exercised.  Exit status 1 when a machine failed.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
import traceback
from pathlib import Path

from hypothesis import Phase, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.stateful import run_state_machine_as_test

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import test_services_model as model


def counted(base: type, counts: collections.Counter[str]) -> type:
    """`base` counting its examples, its steps and the example of the first failure in `counts`."""

    class Counted(base):  # type: ignore[misc]  # a base chosen at run time
        def __init__(self) -> None:
            super().__init__()
            counts["examples"] += 1

        def check_invariants(self, *a: object, **k: object) -> None:
            counts["steps"] += 1
            try:
                super().check_invariants(*a, **k)
            except BaseException:
                counts["first_failure"] = counts["first_failure"] or counts["examples"]
                raise

    Counted.__name__ = base.__name__
    return Counted


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=200, help="examples per machine (default 200)")
    parser.add_argument("--steps", type=int, default=30, help="steps per example (default 30)")
    parser.add_argument("--seed", type=int, default=0, help="Hypothesis seed (default 0)")
    parser.add_argument("--no-shrink", action="store_true", help="report the first failing example as found")
    parser.add_argument("--machine", action="append", choices=sorted(model.MACHINES),
                        help="run only these machines (repeatable; default: all)")
    args = parser.parse_args(argv)
    chosen = args.machine or list(model.MACHINES)
    failures = 0
    total_examples = total_steps = 0
    for index, key in enumerate(chosen):
        base = model.MACHINES[key]
        counts: collections.Counter[str] = collections.Counter()

        factory = hypothesis_seed(args.seed * 100 + index)(counted(base, counts))  # one choice sequence per machine
        started = time.perf_counter()
        error = None
        try:
            chosen_settings = model.profile(args.examples, args.steps, derandomize=False)
            if args.no_shrink:
                chosen_settings = settings(chosen_settings, phases=[Phase.explicit, Phase.generate])
            run_state_machine_as_test(factory, settings=chosen_settings)
        except Exception as exc:  # noqa: BLE001 - a failing example: Hypothesis has printed it (shrunk) on stdout
            error = exc
        seconds = time.perf_counter() - started
        total_examples += counts["examples"]
        total_steps += counts["steps"]
        status = "ok" if error is None else f"FAILED: {type(error).__name__}: {str(error).splitlines()[0][:300]}"
        first = counts["first_failure"]
        print(f"{key:14} examples {counts['examples']:5}  steps {counts['steps']:6}  {seconds:7.1f} s  {status}"
              + (f" (first failing example: #{first})" if error is not None else ""),
              flush=True)
        if error is not None:
            failures += 1
            traceback.print_exception(error, limit=-3)
    print(f"\n{len(chosen)} machine(s), {total_examples} examples (including shrinking), {total_steps} steps, "
          f"{failures} failure(s); seed {args.seed}, --examples {args.examples} --steps {args.steps}")
    print("rules exercised (machine:rule variant → times):")
    for name, n in sorted(model.RULES.items()):
        print(f"  {name:60} {n}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
