"""Lightning 2.4 as the judge of hpu-train's config surface (lightning_interop_test.cc).

Runs in .venv/interop (scripts/install-deps.sh --interop), with lightning 2.4.0,
jsonargparse and torch 2.13.0 (CPU) from tests/interop/requirements.txt.

lightning-habana cannot be imported here (it needs Habana's software stack), so
its classes are stand-ins written for this test: lightning_habana_standin.py,
installed as the module `lightning_habana`, with the constructor signatures of
lightning-habana 1.6.0's public source (see that file's docstring). Every other
class is the installed package's own.

    check_lightning.py signatures OURS.json OUT.json
        OURS.json is hpu_schema_dump's output. Writes, for the Trainer and
        every registered class whose class path lies under lightning, torch or
        lightning_habana, the signature jsonargparse (LightningCLI's parser)
        derives from the installed class: every init_arg with its default
        (JSON; {"required": true} when it has none, {"repr": ...} when not
        plain data) and its type.
    check_lightning.py print_mirror OUT.yaml [ARGS...]
        LightningCLI `fit --print_config` with ARGS (--model=MLPClassifier
        --data=CSVDataModule ...), for the MLPClassifier, RandomDataModule and
        CSVDataModule written below with the init_args of hpu-train's classes
        of those names; the file is written to OUT.yaml.
    check_lightning.py reprint IN.yaml OUT.yaml
        LightningCLI `fit --config IN.yaml --print_config`, written to OUT.yaml.
"""

import contextlib
import dataclasses
import datetime
import importlib
import inspect
import io
import json
import math
import os
import sys
import warnings
from typing import List, Literal, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lightning_habana_standin  # noqa: E402

sys.modules["lightning_habana"] = lightning_habana_standin

import lightning  # noqa: E402
import torch  # noqa: E402
from jsonargparse._parameter_resolvers import get_signature_parameters  # noqa: E402
from lightning.pytorch import LightningDataModule, LightningModule  # noqa: E402
from lightning.pytorch.cli import LightningCLI  # noqa: E402

warnings.filterwarnings("ignore")

JUDGED = ("lightning.", "lightning_habana", "pytorch_lightning", "lightning_fabric", "torch.")


def plain(value):
    """A default as JSON, as hpu_schema_dump writes ours."""
    if value is inspect.Parameter.empty:
        return {"required": True}
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int) and not hasattr(value, "name"):  # an IntEnum stays a repr
        return int(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        return value
    if isinstance(value, (list, tuple)):
        items = [plain(v) for v in value]
        return items if all(not isinstance(i, dict) or "repr" not in i for i in items) else {"repr": repr(value)}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: plain(v) for k, v in value.items()}
    # as LightningCLI prints them: a dataclass as its fields, a timedelta as str()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain(dataclasses.asdict(value))
    if isinstance(value, datetime.timedelta):
        return str(value)
    return {"repr": repr(value)}


def type_name(annotation):
    if annotation is inspect.Parameter.empty:
        return "Any"
    text = annotation.__name__ if isinstance(annotation, type) else str(annotation)
    return text.replace("typing.", "")


def signature(cls):
    out = []
    for p in get_signature_parameters(cls, None):
        if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        out.append({"name": p.name, "default": plain(p.default), "type": type_name(p.annotation)})
    return out


def load(class_path):
    module, _, name = class_path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def signatures(ours_path, out_path):
    ours = json.load(open(ours_path))
    out = {"lightning": lightning.__version__, "torch": torch.__version__, "classes": {}, "skipped": []}
    out["trainer"] = signature(lightning.pytorch.Trainer)
    for c in ours["components"]:
        path = c["class_path"]
        if not path.startswith(JUDGED):
            out["skipped"].append(path)
            continue
        try:
            cls = load(path)
        except Exception as e:  # noqa: BLE001 - reported to the test as the finding
            out["classes"][path] = {"error": f"{type(e).__name__}: {e}"}
            continue
        out["classes"][path] = {"params": signature(cls)}
    json.dump(out, open(out_path, "w"), indent=1)


# hpu-train's MLPClassifier and RandomDataModule (core/models/src/mlp.cc,
# core/data/src/random_datamodule.cc and batching.h), as a LightningCLI user
# writes them in the script that runs LightningCLI.
class MLPClassifier(LightningModule):
    def __init__(
        self,
        hidden: List[int] = [256, 128],
        dropout: float = 0.2,
        activation: Literal["relu", "gelu", "tanh", "sigmoid"] = "relu",
        lr: float = 0.001,
        label_smoothing: float = 0.0,
    ):
        super().__init__()


class RandomDataModule(LightningDataModule):
    def __init__(
        self,
        size: int = 32,
        length: int = 64,
        batch_size: int = 32,
        num_workers: int = 0,
        shuffle: bool = True,
        drop_last: bool = False,
        seed: int = 42,
    ):
        super().__init__()


class CSVDataModule(LightningDataModule):
    """hpu-train's CSVDataModule (core/data/src/csv_datamodule.cc)."""

    def __init__(
        self,
        train_file: Optional[str] = None,
        val_file: Optional[str] = None,
        test_file: Optional[str] = None,
        predict_file: Optional[str] = None,
        label_column: str = "label",
        header: bool = True,
        delimiter: str = ",",
        val_split: float = 0.1,
        standardize: bool = True,
        batch_size: int = 32,
        num_workers: int = 0,
        shuffle: bool = True,
        drop_last: bool = False,
        seed: int = 42,
    ):
        super().__init__()


def print_config(args, out_path, **cli_kwargs):
    """LightningCLI's --print_config for `args`, written to out_path."""
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        try:
            LightningCLI(args=args, save_config_callback=None, **cli_kwargs)
        except SystemExit as e:
            if e.code not in (0, None):
                raise
    with open(out_path, "w") as f:
        f.write(text.getvalue())


def main():
    mode = sys.argv[1]
    if mode == "signatures":
        signatures(sys.argv[2], sys.argv[3])
    elif mode == "print_mirror":
        print_config(["fit", *sys.argv[3:], "--print_config"], sys.argv[2],
                     subclass_mode_model=True, subclass_mode_data=True)
    elif mode == "reprint":
        print_config(["fit", "--config", sys.argv[2], "--print_config"], sys.argv[3],
                     subclass_mode_model=True, subclass_mode_data=True)
    else:
        sys.exit(f"check_lightning.py: unknown mode {mode!r}")


if __name__ == "__main__":
    main()
