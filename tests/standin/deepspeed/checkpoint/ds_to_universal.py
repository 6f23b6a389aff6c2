"""Test-only stand-in for `python -m deepspeed.checkpoint.ds_to_universal`: the real one's
arguments (deepspeed/checkpoint/ds_to_universal.py: --input_folder, --output_folder,
--inject_missing_state, --num_extract_workers, --num_merge_workers, --keep_temp_folder,
--no_strict) and its result: the output folder holds a universal checkpoint of the input tag,
which loads at any DP size. Here each file of the input is copied and its state marked
universal; the input is only read. STANDIN_CONVERT_SECONDS slows it down (a big checkpoint).
"""

import argparse
import json
import os
import shutil
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--input_folder", type=str, required=True)
    parser.add_argument("--output_folder", type=str, required=True)
    parser.add_argument("--num_extract_workers", type=int, default=4)
    parser.add_argument("--num_merge_workers", type=int, default=2)
    parser.add_argument("--keep_temp_folder", action="store_true")
    parser.add_argument("--no_strict", dest="strict", action="store_false")
    parser.add_argument("--inject_missing_state", action="store_true")
    args = parser.parse_args()
    print(f"args = {args}", flush=True)
    if not os.path.isdir(args.input_folder):
        raise FileNotFoundError(args.input_folder)
    time.sleep(float(os.environ.get("STANDIN_CONVERT_SECONDS", "0")))
    os.makedirs(args.output_folder, exist_ok=True)
    for name in os.listdir(args.input_folder):
        source = os.path.join(args.input_folder, name)
        if os.path.isfile(source):
            shutil.copy2(source, os.path.join(args.output_folder, name))
    state = os.path.join(args.output_folder, "state.json")
    if os.path.isfile(state):
        with open(state) as handle:
            data = json.load(handle)
        data.update({"universal": True, "dp": None})
        with open(state, "w") as handle:
            json.dump(data, handle)
    print("*** Done", flush=True)


if __name__ == "__main__":
    main()
