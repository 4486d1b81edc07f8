"""Stand-ins for lightning-habana's classes, for check_lightning.py.

lightning-habana imports Habana's software stack (habana_frameworks) at import
time, which cannot be installed here. These classes are written for this test
and are not lightning-habana's code: each has the constructor signature (names,
annotations, defaults) of lightning-habana 1.6.0, the release for Lightning
2.4 (github.com/Lightning-AI/lightning-Habana, tag 1.6.0:
src/lightning_habana/pytorch/{accelerator.py, strategies/single.py,
strategies/parallel.py, strategies/ddp.py, strategies/deepspeed.py, strategies/fsdp.py,
plugins/precision.py, plugins/deepspeed_precision.py, plugins/io_plugin.py,
profiler/profiler.py}), derives from the same Lightning class, and passes
its arguments to that class as lightning-habana does, so that jsonargparse
resolves **kwargs into the same Lightning parameters. Nothing here runs a
model: the classes are only parsed and printed by LightningCLI.

check_lightning.py installs this module as `lightning_habana`, and the classes
print as LightningCLI prints lightning-habana's (`lightning_habana.HPUProfiler`).
"""

import logging
from pathlib import Path
from typing import Any, Callable, Dict, List, Literal, Optional, Union

import torch
from lightning.fabric.plugins import CheckpointIO, ClusterEnvironment, TorchCheckpointIO
from lightning.fabric.utilities.types import _PATH
from lightning.pytorch.accelerators import Accelerator
from lightning.pytorch.plugins.precision import Precision
from lightning.pytorch.profilers import PyTorchProfiler
from lightning.fabric.plugins.collectives.torch_collective import default_pg_timeout
from lightning.pytorch.strategies import DDPStrategy, FSDPStrategy, SingleDeviceStrategy

_DEVICE = Union[torch.device, str, int]
_PRECISION_INPUT = Literal["32", "32-true", "bf16", "bf16-mixed", "fp8", "16-mixed"]


class HPUAccelerator(Accelerator):
    """accelerator.py: no constructor arguments."""

    def setup_device(self, device: torch.device) -> None:
        pass

    def teardown(self) -> None:
        pass

    @staticmethod
    def parse_devices(devices: Any) -> Any:
        return devices

    @staticmethod
    def get_parallel_devices(devices: Any) -> List[torch.device]:
        return [torch.device("cpu")]

    @staticmethod
    def auto_device_count() -> int:
        return 8

    @staticmethod
    def is_available() -> bool:
        return True

    def get_device_stats(self, device: Any) -> Dict[str, Any]:
        return {}


class HPUCheckpointIO(TorchCheckpointIO):
    """plugins/io_plugin.py: no constructor arguments."""


class HPUPrecisionPlugin(Precision):
    """plugins/precision.py."""

    def __init__(
        self,
        precision: _PRECISION_INPUT = "32-true",
        device: str = "hpu",
    ) -> None:
        self.precision = precision
        self.device = device


class HPUDeepSpeedPrecisionPlugin(HPUPrecisionPlugin):
    """plugins/deepspeed_precision.py."""

    def __init__(
        self,
        precision: _PRECISION_INPUT = "32-true",
        device: str = "hpu",
    ) -> None:
        super().__init__(precision=precision, device=device)


class HPUProfiler(PyTorchProfiler):
    """profiler/profiler.py: **profiler_kwargs go to PyTorchProfiler."""

    def __init__(
        self,
        dirpath: Optional[Union[str, Path]] = None,
        filename: Optional[str] = None,
        group_by_input_shapes: bool = False,
        export_to_chrome: bool = True,
        row_limit: int = 20,
        sort_by_key: Optional[str] = None,
        record_module_names: bool = False,
        **profiler_kwargs: Any,
    ) -> None:
        super().__init__(
            dirpath=dirpath,
            filename=filename,
            group_by_input_shapes=group_by_input_shapes,
            export_to_chrome=export_to_chrome,
            row_limit=row_limit,
            sort_by_key=sort_by_key or "cpu_time_total",
            record_module_names=record_module_names,
            **profiler_kwargs,
        )


class SingleHPUStrategy(SingleDeviceStrategy):
    """strategies/single.py."""

    def __init__(
        self,
        device: _DEVICE = "hpu",
        accelerator: Optional[Accelerator] = None,
        checkpoint_io: Optional[CheckpointIO] = None,
        precision_plugin: Optional[Precision] = None,
    ):
        super().__init__(
            device="cpu", accelerator=accelerator, checkpoint_io=checkpoint_io, precision_plugin=precision_plugin
        )


class HPUParallelStrategy(DDPStrategy):
    """strategies/parallel.py: **kwargs go to DDPStrategy."""

    def __init__(
        self,
        accelerator: Optional[Accelerator] = None,
        parallel_devices: Optional[List[torch.device]] = None,
        cluster_environment: Optional[ClusterEnvironment] = None,
        checkpoint_io: Optional[CheckpointIO] = None,
        precision_plugin: Optional[Precision] = None,
        ddp_comm_state: Optional[object] = None,
        ddp_comm_hook: Optional[Callable] = None,
        ddp_comm_wrapper: Optional[Callable] = None,
        model_averaging_period: Optional[int] = None,
        process_group_backend: Optional[str] = "hccl",
        **kwargs: Any,
    ) -> None:
        super().__init__(
            accelerator=accelerator,
            parallel_devices=parallel_devices,
            cluster_environment=cluster_environment,
            checkpoint_io=checkpoint_io,
            precision_plugin=precision_plugin,
            ddp_comm_state=ddp_comm_state,
            ddp_comm_hook=ddp_comm_hook,
            ddp_comm_wrapper=ddp_comm_wrapper,
            model_averaging_period=model_averaging_period,
            process_group_backend=process_group_backend,
            **kwargs,
        )


class HPUDDPStrategy(HPUParallelStrategy):
    """strategies/ddp.py: the same arguments as HPUParallelStrategy."""


class HPUDeepSpeedStrategy(HPUDDPStrategy):
    """strategies/deepspeed.py: **kwargs go to deepspeed.init_inference, not to a parent."""

    def __init__(
        self,
        accelerator: Optional[Accelerator] = None,
        zero_optimization: bool = True,
        stage: int = 2,
        remote_device: Optional[str] = None,
        offload_optimizer: bool = False,
        offload_parameters: bool = False,
        offload_params_device: str = "cpu",
        nvme_path: str = "/local_nvme",
        params_buffer_count: int = 5,
        params_buffer_size: int = 100_000_000,
        max_in_cpu: int = 1_000_000_000,
        offload_optimizer_device: str = "cpu",
        optimizer_buffer_count: int = 4,
        block_size: int = 1048576,
        queue_depth: int = 8,
        single_submit: bool = False,
        overlap_events: bool = True,
        thread_count: int = 1,
        pin_memory: bool = False,
        sub_group_size: int = 1_000_000_000_000,
        contiguous_gradients: bool = True,
        overlap_comm: bool = True,
        allgather_partitions: bool = True,
        reduce_scatter: bool = True,
        allgather_bucket_size: int = 200_000_000,
        reduce_bucket_size: int = 200_000_000,
        zero_allow_untested_optimizer: bool = True,
        logging_batch_size_per_gpu: Union[str, int] = "auto",
        config: Optional[Union[_PATH, Dict[str, Any]]] = None,
        logging_level: int = logging.WARN,
        parallel_devices: Optional[List[torch.device]] = None,
        cluster_environment: Optional[ClusterEnvironment] = None,
        loss_scale: float = 0,
        initial_scale_power: int = 16,
        loss_scale_window: int = 1000,
        hysteresis: int = 2,
        min_loss_scale: int = 1,
        partition_activations: bool = False,
        cpu_checkpointing: bool = False,
        contiguous_memory_optimization: bool = False,
        synchronize_checkpoint_boundary: bool = False,
        load_full_weights: bool = False,
        precision_plugin: Optional[Precision] = None,
        process_group_backend: Optional[str] = "hccl",
        **kwargs: Any,
    ) -> None:
        super().__init__(
            accelerator=accelerator,
            parallel_devices=parallel_devices,
            cluster_environment=cluster_environment,
            precision_plugin=precision_plugin,
            process_group_backend=process_group_backend,
        )
        self.kwargs = kwargs


class HPUFSDPStrategy(FSDPStrategy):
    """strategies/fsdp.py: everything, **kwargs included, goes to FSDPStrategy.

    lightning-habana's checkpoint_io and precision_plugin defaults are objects
    (HPUCheckpointIO(), HPUFSDPPrecision("bf16-mixed")) that the Trainer
    replaces with the ones its own keys make; None here, as a printed config has them.
    """

    def __init__(
        self,
        accelerator: Optional[Accelerator] = None,
        parallel_devices: Optional[List[torch.device]] = None,
        cluster_environment: Optional[ClusterEnvironment] = None,
        checkpoint_io: Optional[CheckpointIO] = None,
        precision_plugin: Optional[Precision] = None,
        process_group_backend: Optional[str] = "hccl",
        timeout: Optional[Any] = default_pg_timeout,
        cpu_offload: Union[bool, Any, None] = None,
        mixed_precision: Optional[Any] = None,
        auto_wrap_policy: Optional[Any] = None,
        activation_checkpointing: Optional[Any] = None,
        activation_checkpointing_policy: Optional[Any] = None,
        sharding_strategy: Any = "FULL_SHARD",
        state_dict_type: Literal["full", "sharded"] = "full",
        **kwargs: Any,
    ) -> None:
        super().__init__(
            accelerator=accelerator,
            parallel_devices=parallel_devices,
            cluster_environment=cluster_environment,
            checkpoint_io=checkpoint_io,
            precision_plugin=precision_plugin,
            process_group_backend=process_group_backend,
            timeout=timeout,
            cpu_offload=cpu_offload,
            mixed_precision=mixed_precision,
            auto_wrap_policy=auto_wrap_policy,
            activation_checkpointing=activation_checkpointing,
            activation_checkpointing_policy=activation_checkpointing_policy,
            sharding_strategy=sharding_strategy,
            state_dict_type=state_dict_type,
            **kwargs,
        )


for _cls in (HPUAccelerator, HPUCheckpointIO, HPUPrecisionPlugin, HPUDeepSpeedPrecisionPlugin, HPUProfiler,
             SingleHPUStrategy, HPUParallelStrategy, HPUDDPStrategy, HPUDeepSpeedStrategy, HPUFSDPStrategy):
    _cls.__module__ = "lightning_habana"
