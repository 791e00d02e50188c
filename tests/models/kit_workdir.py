"""What the training kits' model tests share: their command line and a folder holding what
the kit's --quick mode wrote.

    args, extra, work = kit_workdir("tools/dccnn/train_dccnn.py", "grove_dccnn_")

Options: --grove BINARY (required), --grove-args "ARGS" (split into `extra`), --keep DIR (work
there instead of a new temporary folder), --trained DIR (a folder the kit's --quick mode
wrote: copied, not trained again; ctest trains once for every configuration).
"""
import argparse
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def kit_workdir(script, prefix, description=None):
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--grove", required=True)
    ap.add_argument("--grove-args", default="")
    ap.add_argument("--keep", type=Path, help="work in this folder instead of a new temporary one")
    ap.add_argument("--trained", type=Path, help=f"a folder {script} --quick wrote: copied, not trained again")
    args = ap.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix=prefix))
    work.mkdir(parents=True, exist_ok=True)
    if args.trained:
        shutil.copytree(args.trained, work, dirs_exist_ok=True)
    else:
        subprocess.run([sys.executable, str(ROOT / script), "--quick", "--out", str(work)], check=True,
                       stdout=subprocess.DEVNULL)
    return args, shlex.split(args.grove_args), work
