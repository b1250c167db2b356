from google.protobuf import descriptor_pb2 as _descriptor_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Encoding(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PLAIN: _ClassVar[Encoding]
    DELTA: _ClassVar[Encoding]
    STRING: _ClassVar[Encoding]
    REF: _ClassVar[Encoding]
PLAIN: Encoding
DELTA: Encoding
STRING: Encoding
REF: Encoding
ENCODING_FIELD_NUMBER: _ClassVar[int]
encoding: _descriptor.FieldDescriptor
UNIT_FIELD_NUMBER: _ClassVar[int]
unit: _descriptor.FieldDescriptor
REF_TABLE_FIELD_NUMBER: _ClassVar[int]
ref_table: _descriptor.FieldDescriptor
DEFAULT_VALUE_FIELD_NUMBER: _ClassVar[int]
default_value: _descriptor.FieldDescriptor

class Header(_message.Message):
    __slots__ = ("format_major", "format_minor", "producer", "producer_version", "capture_config_json", "created_unix_ns", "source_format", "source_path", "instance_id", "process_id", "rank", "world_size", "run_id", "window_index", "simulated", "devices", "clock_domains", "sync_points", "metadata", "simulation")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    FORMAT_MAJOR_FIELD_NUMBER: _ClassVar[int]
    FORMAT_MINOR_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_VERSION_FIELD_NUMBER: _ClassVar[int]
    CAPTURE_CONFIG_JSON_FIELD_NUMBER: _ClassVar[int]
    CREATED_UNIX_NS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FORMAT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_PATH_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    PROCESS_ID_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    WORLD_SIZE_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    WINDOW_INDEX_FIELD_NUMBER: _ClassVar[int]
    SIMULATED_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    CLOCK_DOMAINS_FIELD_NUMBER: _ClassVar[int]
    SYNC_POINTS_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SIMULATION_FIELD_NUMBER: _ClassVar[int]
    format_major: int
    format_minor: int
    producer: str
    producer_version: str
    capture_config_json: str
    created_unix_ns: int
    source_format: str
    source_path: str
    instance_id: str
    process_id: int
    rank: int
    world_size: int
    run_id: str
    window_index: int
    simulated: bool
    devices: _containers.RepeatedCompositeFieldContainer[Device]
    clock_domains: _containers.RepeatedCompositeFieldContainer[ClockDomain]
    sync_points: _containers.RepeatedCompositeFieldContainer[ClockSync]
    metadata: _containers.ScalarMap[str, str]
    simulation: Simulation
    def __init__(self, format_major: _Optional[int] = ..., format_minor: _Optional[int] = ..., producer: _Optional[str] = ..., producer_version: _Optional[str] = ..., capture_config_json: _Optional[str] = ..., created_unix_ns: _Optional[int] = ..., source_format: _Optional[str] = ..., source_path: _Optional[str] = ..., instance_id: _Optional[str] = ..., process_id: _Optional[int] = ..., rank: _Optional[int] = ..., world_size: _Optional[int] = ..., run_id: _Optional[str] = ..., window_index: _Optional[int] = ..., simulated: _Optional[bool] = ..., devices: _Optional[_Iterable[_Union[Device, _Mapping]]] = ..., clock_domains: _Optional[_Iterable[_Union[ClockDomain, _Mapping]]] = ..., sync_points: _Optional[_Iterable[_Union[ClockSync, _Mapping]]] = ..., metadata: _Optional[_Mapping[str, str]] = ..., simulation: _Optional[_Union[Simulation, _Mapping]] = ...) -> None: ...

class Simulation(_message.Message):
    __slots__ = ("model", "target", "host_timeline", "documentation", "assumptions", "unpriced_ops", "source")
    class AssumptionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    MODEL_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    HOST_TIMELINE_FIELD_NUMBER: _ClassVar[int]
    DOCUMENTATION_FIELD_NUMBER: _ClassVar[int]
    ASSUMPTIONS_FIELD_NUMBER: _ClassVar[int]
    UNPRICED_OPS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    model: str
    target: str
    host_timeline: str
    documentation: str
    assumptions: _containers.ScalarMap[str, str]
    unpriced_ops: _containers.RepeatedScalarFieldContainer[str]
    source: str
    def __init__(self, model: _Optional[str] = ..., target: _Optional[str] = ..., host_timeline: _Optional[str] = ..., documentation: _Optional[str] = ..., assumptions: _Optional[_Mapping[str, str]] = ..., unpriced_ops: _Optional[_Iterable[str]] = ..., source: _Optional[str] = ...) -> None: ...

class Device(_message.Message):
    __slots__ = ("index", "kind", "name", "simulated", "spec", "properties")
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    INDEX_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SIMULATED_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    index: int
    kind: str
    name: str
    simulated: bool
    spec: HardwareSpec
    properties: _containers.ScalarMap[str, str]
    def __init__(self, index: _Optional[int] = ..., kind: _Optional[str] = ..., name: _Optional[str] = ..., simulated: _Optional[bool] = ..., spec: _Optional[_Union[HardwareSpec, _Mapping]] = ..., properties: _Optional[_Mapping[str, str]] = ...) -> None: ...

class HardwareSpec(_message.Message):
    __slots__ = ("source", "num_cores", "peak_flops_per_s", "vector_flops_per_s", "hbm_capacity_bytes", "hbm_bandwidth_bytes_per_s", "hbm_bandwidth_per_core_bytes_per_s", "dma_bandwidth_per_core_bytes_per_s", "sbuf_bytes_per_core", "psum_bytes_per_core", "interconnect_bandwidth_bytes_per_s", "engines", "tensor_engine_num_rows", "tensor_engine_num_cols", "dma_engines_per_core", "cc_cores")
    class PeakFlopsPerSEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class VectorFlopsPerSEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    NUM_CORES_FIELD_NUMBER: _ClassVar[int]
    PEAK_FLOPS_PER_S_FIELD_NUMBER: _ClassVar[int]
    VECTOR_FLOPS_PER_S_FIELD_NUMBER: _ClassVar[int]
    HBM_CAPACITY_BYTES_FIELD_NUMBER: _ClassVar[int]
    HBM_BANDWIDTH_BYTES_PER_S_FIELD_NUMBER: _ClassVar[int]
    HBM_BANDWIDTH_PER_CORE_BYTES_PER_S_FIELD_NUMBER: _ClassVar[int]
    DMA_BANDWIDTH_PER_CORE_BYTES_PER_S_FIELD_NUMBER: _ClassVar[int]
    SBUF_BYTES_PER_CORE_FIELD_NUMBER: _ClassVar[int]
    PSUM_BYTES_PER_CORE_FIELD_NUMBER: _ClassVar[int]
    INTERCONNECT_BANDWIDTH_BYTES_PER_S_FIELD_NUMBER: _ClassVar[int]
    ENGINES_FIELD_NUMBER: _ClassVar[int]
    TENSOR_ENGINE_NUM_ROWS_FIELD_NUMBER: _ClassVar[int]
    TENSOR_ENGINE_NUM_COLS_FIELD_NUMBER: _ClassVar[int]
    DMA_ENGINES_PER_CORE_FIELD_NUMBER: _ClassVar[int]
    CC_CORES_FIELD_NUMBER: _ClassVar[int]
    source: str
    num_cores: int
    peak_flops_per_s: _containers.ScalarMap[str, float]
    vector_flops_per_s: _containers.ScalarMap[str, float]
    hbm_capacity_bytes: float
    hbm_bandwidth_bytes_per_s: float
    hbm_bandwidth_per_core_bytes_per_s: float
    dma_bandwidth_per_core_bytes_per_s: float
    sbuf_bytes_per_core: float
    psum_bytes_per_core: float
    interconnect_bandwidth_bytes_per_s: float
    engines: _containers.RepeatedCompositeFieldContainer[EngineSpec]
    tensor_engine_num_rows: int
    tensor_engine_num_cols: int
    dma_engines_per_core: int
    cc_cores: int
    def __init__(self, source: _Optional[str] = ..., num_cores: _Optional[int] = ..., peak_flops_per_s: _Optional[_Mapping[str, float]] = ..., vector_flops_per_s: _Optional[_Mapping[str, float]] = ..., hbm_capacity_bytes: _Optional[float] = ..., hbm_bandwidth_bytes_per_s: _Optional[float] = ..., hbm_bandwidth_per_core_bytes_per_s: _Optional[float] = ..., dma_bandwidth_per_core_bytes_per_s: _Optional[float] = ..., sbuf_bytes_per_core: _Optional[float] = ..., psum_bytes_per_core: _Optional[float] = ..., interconnect_bandwidth_bytes_per_s: _Optional[float] = ..., engines: _Optional[_Iterable[_Union[EngineSpec, _Mapping]]] = ..., tensor_engine_num_rows: _Optional[int] = ..., tensor_engine_num_cols: _Optional[int] = ..., dma_engines_per_core: _Optional[int] = ..., cc_cores: _Optional[int] = ...) -> None: ...

class EngineSpec(_message.Message):
    __slots__ = ("name", "clock_hz", "lanes")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CLOCK_HZ_FIELD_NUMBER: _ClassVar[int]
    LANES_FIELD_NUMBER: _ClassVar[int]
    name: str
    clock_hz: float
    lanes: int
    def __init__(self, name: _Optional[str] = ..., clock_hz: _Optional[float] = ..., lanes: _Optional[int] = ...) -> None: ...

class ClockDomain(_message.Message):
    __slots__ = ("name", "description")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ...) -> None: ...

class ClockSync(_message.Message):
    __slots__ = ("domain", "host_ts", "device_ts")
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    HOST_TS_FIELD_NUMBER: _ClassVar[int]
    DEVICE_TS_FIELD_NUMBER: _ClassVar[int]
    domain: str
    host_ts: int
    device_ts: int
    def __init__(self, domain: _Optional[str] = ..., host_ts: _Optional[int] = ..., device_ts: _Optional[int] = ...) -> None: ...

class Chunk(_message.Message):
    __slots__ = ("first_row", "rows", "strings", "tracks", "host_ops", "instructions", "dma", "collectives", "counters", "flows", "allocations")
    FIRST_ROW_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    STRINGS_FIELD_NUMBER: _ClassVar[int]
    TRACKS_FIELD_NUMBER: _ClassVar[int]
    HOST_OPS_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    DMA_FIELD_NUMBER: _ClassVar[int]
    COLLECTIVES_FIELD_NUMBER: _ClassVar[int]
    COUNTERS_FIELD_NUMBER: _ClassVar[int]
    FLOWS_FIELD_NUMBER: _ClassVar[int]
    ALLOCATIONS_FIELD_NUMBER: _ClassVar[int]
    first_row: int
    rows: int
    strings: StringColumns
    tracks: TrackColumns
    host_ops: HostOpColumns
    instructions: InstructionColumns
    dma: DmaColumns
    collectives: CollectiveColumns
    counters: CounterColumns
    flows: FlowColumns
    allocations: AllocationColumns
    def __init__(self, first_row: _Optional[int] = ..., rows: _Optional[int] = ..., strings: _Optional[_Union[StringColumns, _Mapping]] = ..., tracks: _Optional[_Union[TrackColumns, _Mapping]] = ..., host_ops: _Optional[_Union[HostOpColumns, _Mapping]] = ..., instructions: _Optional[_Union[InstructionColumns, _Mapping]] = ..., dma: _Optional[_Union[DmaColumns, _Mapping]] = ..., collectives: _Optional[_Union[CollectiveColumns, _Mapping]] = ..., counters: _Optional[_Union[CounterColumns, _Mapping]] = ..., flows: _Optional[_Union[FlowColumns, _Mapping]] = ..., allocations: _Optional[_Union[AllocationColumns, _Mapping]] = ...) -> None: ...

class StringColumns(_message.Message):
    __slots__ = ("value",)
    VALUE_FIELD_NUMBER: _ClassVar[int]
    value: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, value: _Optional[_Iterable[str]] = ...) -> None: ...

class TrackColumns(_message.Message):
    __slots__ = ("parent", "kind", "name", "device", "nc_idx", "pid", "tid", "rank", "sort_index", "unit")
    PARENT_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    NC_IDX_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    TID_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    SORT_INDEX_FIELD_NUMBER: _ClassVar[int]
    UNIT_FIELD_NUMBER: _ClassVar[int]
    parent: _containers.RepeatedScalarFieldContainer[int]
    kind: _containers.RepeatedScalarFieldContainer[int]
    name: _containers.RepeatedScalarFieldContainer[int]
    device: _containers.RepeatedScalarFieldContainer[int]
    nc_idx: _containers.RepeatedScalarFieldContainer[int]
    pid: _containers.RepeatedScalarFieldContainer[int]
    tid: _containers.RepeatedScalarFieldContainer[int]
    rank: _containers.RepeatedScalarFieldContainer[int]
    sort_index: _containers.RepeatedScalarFieldContainer[int]
    unit: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, parent: _Optional[_Iterable[int]] = ..., kind: _Optional[_Iterable[int]] = ..., name: _Optional[_Iterable[int]] = ..., device: _Optional[_Iterable[int]] = ..., nc_idx: _Optional[_Iterable[int]] = ..., pid: _Optional[_Iterable[int]] = ..., tid: _Optional[_Iterable[int]] = ..., rank: _Optional[_Iterable[int]] = ..., sort_index: _Optional[_Iterable[int]] = ..., unit: _Optional[_Iterable[int]] = ...) -> None: ...

class HostOpColumns(_message.Message):
    __slots__ = ("track", "name", "category", "start_ts", "duration_ns", "input_shapes", "input_dtypes", "module", "stack", "sequence_number", "correlation_id", "external_id", "flops", "args", "measured_start_ts", "measured_duration_ns")
    TRACK_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    START_TS_FIELD_NUMBER: _ClassVar[int]
    DURATION_NS_FIELD_NUMBER: _ClassVar[int]
    INPUT_SHAPES_FIELD_NUMBER: _ClassVar[int]
    INPUT_DTYPES_FIELD_NUMBER: _ClassVar[int]
    MODULE_FIELD_NUMBER: _ClassVar[int]
    STACK_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    EXTERNAL_ID_FIELD_NUMBER: _ClassVar[int]
    FLOPS_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    MEASURED_START_TS_FIELD_NUMBER: _ClassVar[int]
    MEASURED_DURATION_NS_FIELD_NUMBER: _ClassVar[int]
    track: _containers.RepeatedScalarFieldContainer[int]
    name: _containers.RepeatedScalarFieldContainer[int]
    category: _containers.RepeatedScalarFieldContainer[int]
    start_ts: _containers.RepeatedScalarFieldContainer[int]
    duration_ns: _containers.RepeatedScalarFieldContainer[int]
    input_shapes: _containers.RepeatedScalarFieldContainer[int]
    input_dtypes: _containers.RepeatedScalarFieldContainer[int]
    module: _containers.RepeatedScalarFieldContainer[int]
    stack: _containers.RepeatedScalarFieldContainer[int]
    sequence_number: _containers.RepeatedScalarFieldContainer[int]
    correlation_id: _containers.RepeatedScalarFieldContainer[int]
    external_id: _containers.RepeatedScalarFieldContainer[int]
    flops: _containers.RepeatedScalarFieldContainer[int]
    args: _containers.RepeatedScalarFieldContainer[int]
    measured_start_ts: _containers.RepeatedScalarFieldContainer[int]
    measured_duration_ns: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, track: _Optional[_Iterable[int]] = ..., name: _Optional[_Iterable[int]] = ..., category: _Optional[_Iterable[int]] = ..., start_ts: _Optional[_Iterable[int]] = ..., duration_ns: _Optional[_Iterable[int]] = ..., input_shapes: _Optional[_Iterable[int]] = ..., input_dtypes: _Optional[_Iterable[int]] = ..., module: _Optional[_Iterable[int]] = ..., stack: _Optional[_Iterable[int]] = ..., sequence_number: _Optional[_Iterable[int]] = ..., correlation_id: _Optional[_Iterable[int]] = ..., external_id: _Optional[_Iterable[int]] = ..., flops: _Optional[_Iterable[int]] = ..., args: _Optional[_Iterable[int]] = ..., measured_start_ts: _Optional[_Iterable[int]] = ..., measured_duration_ns: _Optional[_Iterable[int]] = ...) -> None: ...

class InstructionColumns(_message.Message):
    __slots__ = ("track", "start_ts", "duration_ns", "engine", "opcode", "name", "framework_op", "correlation_id", "raw_flops", "hbm_read_bytes", "hbm_write_bytes", "sbuf_read_bytes", "sbuf_write_bytes", "psum_read_bytes", "psum_write_bytes", "dtype", "tensor_instruction_type", "args", "external_id")
    TRACK_FIELD_NUMBER: _ClassVar[int]
    START_TS_FIELD_NUMBER: _ClassVar[int]
    DURATION_NS_FIELD_NUMBER: _ClassVar[int]
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    OPCODE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    FRAMEWORK_OP_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    RAW_FLOPS_FIELD_NUMBER: _ClassVar[int]
    HBM_READ_BYTES_FIELD_NUMBER: _ClassVar[int]
    HBM_WRITE_BYTES_FIELD_NUMBER: _ClassVar[int]
    SBUF_READ_BYTES_FIELD_NUMBER: _ClassVar[int]
    SBUF_WRITE_BYTES_FIELD_NUMBER: _ClassVar[int]
    PSUM_READ_BYTES_FIELD_NUMBER: _ClassVar[int]
    PSUM_WRITE_BYTES_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    TENSOR_INSTRUCTION_TYPE_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    EXTERNAL_ID_FIELD_NUMBER: _ClassVar[int]
    track: _containers.RepeatedScalarFieldContainer[int]
    start_ts: _containers.RepeatedScalarFieldContainer[int]
    duration_ns: _containers.RepeatedScalarFieldContainer[int]
    engine: _containers.RepeatedScalarFieldContainer[int]
    opcode: _containers.RepeatedScalarFieldContainer[int]
    name: _containers.RepeatedScalarFieldContainer[int]
    framework_op: _containers.RepeatedScalarFieldContainer[int]
    correlation_id: _containers.RepeatedScalarFieldContainer[int]
    raw_flops: _containers.RepeatedScalarFieldContainer[int]
    hbm_read_bytes: _containers.RepeatedScalarFieldContainer[int]
    hbm_write_bytes: _containers.RepeatedScalarFieldContainer[int]
    sbuf_read_bytes: _containers.RepeatedScalarFieldContainer[int]
    sbuf_write_bytes: _containers.RepeatedScalarFieldContainer[int]
    psum_read_bytes: _containers.RepeatedScalarFieldContainer[int]
    psum_write_bytes: _containers.RepeatedScalarFieldContainer[int]
    dtype: _containers.RepeatedScalarFieldContainer[int]
    tensor_instruction_type: _containers.RepeatedScalarFieldContainer[int]
    args: _containers.RepeatedScalarFieldContainer[int]
    external_id: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, track: _Optional[_Iterable[int]] = ..., start_ts: _Optional[_Iterable[int]] = ..., duration_ns: _Optional[_Iterable[int]] = ..., engine: _Optional[_Iterable[int]] = ..., opcode: _Optional[_Iterable[int]] = ..., name: _Optional[_Iterable[int]] = ..., framework_op: _Optional[_Iterable[int]] = ..., correlation_id: _Optional[_Iterable[int]] = ..., raw_flops: _Optional[_Iterable[int]] = ..., hbm_read_bytes: _Optional[_Iterable[int]] = ..., hbm_write_bytes: _Optional[_Iterable[int]] = ..., sbuf_read_bytes: _Optional[_Iterable[int]] = ..., sbuf_write_bytes: _Optional[_Iterable[int]] = ..., psum_read_bytes: _Optional[_Iterable[int]] = ..., psum_write_bytes: _Optional[_Iterable[int]] = ..., dtype: _Optional[_Iterable[int]] = ..., tensor_instruction_type: _Optional[_Iterable[int]] = ..., args: _Optional[_Iterable[int]] = ..., external_id: _Optional[_Iterable[int]] = ...) -> None: ...

class DmaColumns(_message.Message):
    __slots__ = ("track", "start_ts", "duration_ns", "transfer_bytes", "source", "dest", "queue_type", "variable", "framework_op", "descriptor_bytes", "dma_engine")
    TRACK_FIELD_NUMBER: _ClassVar[int]
    START_TS_FIELD_NUMBER: _ClassVar[int]
    DURATION_NS_FIELD_NUMBER: _ClassVar[int]
    TRANSFER_BYTES_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    DEST_FIELD_NUMBER: _ClassVar[int]
    QUEUE_TYPE_FIELD_NUMBER: _ClassVar[int]
    VARIABLE_FIELD_NUMBER: _ClassVar[int]
    FRAMEWORK_OP_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTOR_BYTES_FIELD_NUMBER: _ClassVar[int]
    DMA_ENGINE_FIELD_NUMBER: _ClassVar[int]
    track: _containers.RepeatedScalarFieldContainer[int]
    start_ts: _containers.RepeatedScalarFieldContainer[int]
    duration_ns: _containers.RepeatedScalarFieldContainer[int]
    transfer_bytes: _containers.RepeatedScalarFieldContainer[int]
    source: _containers.RepeatedScalarFieldContainer[int]
    dest: _containers.RepeatedScalarFieldContainer[int]
    queue_type: _containers.RepeatedScalarFieldContainer[int]
    variable: _containers.RepeatedScalarFieldContainer[int]
    framework_op: _containers.RepeatedScalarFieldContainer[int]
    descriptor_bytes: _containers.RepeatedScalarFieldContainer[int]
    dma_engine: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, track: _Optional[_Iterable[int]] = ..., start_ts: _Optional[_Iterable[int]] = ..., duration_ns: _Optional[_Iterable[int]] = ..., transfer_bytes: _Optional[_Iterable[int]] = ..., source: _Optional[_Iterable[int]] = ..., dest: _Optional[_Iterable[int]] = ..., queue_type: _Optional[_Iterable[int]] = ..., variable: _Optional[_Iterable[int]] = ..., framework_op: _Optional[_Iterable[int]] = ..., descriptor_bytes: _Optional[_Iterable[int]] = ..., dma_engine: _Optional[_Iterable[int]] = ...) -> None: ...

class CollectiveColumns(_message.Message):
    __slots__ = ("track", "start_ts", "duration_ns", "operation", "algorithm", "process_group", "replica_group", "group_size", "sequence_number", "input_size", "output_size", "num_elements", "dtype", "algorithm_bandwidth", "bus_bandwidth", "framework_op", "instruction")
    TRACK_FIELD_NUMBER: _ClassVar[int]
    START_TS_FIELD_NUMBER: _ClassVar[int]
    DURATION_NS_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    ALGORITHM_FIELD_NUMBER: _ClassVar[int]
    PROCESS_GROUP_FIELD_NUMBER: _ClassVar[int]
    REPLICA_GROUP_FIELD_NUMBER: _ClassVar[int]
    GROUP_SIZE_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    INPUT_SIZE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_SIZE_FIELD_NUMBER: _ClassVar[int]
    NUM_ELEMENTS_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    ALGORITHM_BANDWIDTH_FIELD_NUMBER: _ClassVar[int]
    BUS_BANDWIDTH_FIELD_NUMBER: _ClassVar[int]
    FRAMEWORK_OP_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTION_FIELD_NUMBER: _ClassVar[int]
    track: _containers.RepeatedScalarFieldContainer[int]
    start_ts: _containers.RepeatedScalarFieldContainer[int]
    duration_ns: _containers.RepeatedScalarFieldContainer[int]
    operation: _containers.RepeatedScalarFieldContainer[int]
    algorithm: _containers.RepeatedScalarFieldContainer[int]
    process_group: _containers.RepeatedScalarFieldContainer[int]
    replica_group: _containers.RepeatedScalarFieldContainer[int]
    group_size: _containers.RepeatedScalarFieldContainer[int]
    sequence_number: _containers.RepeatedScalarFieldContainer[int]
    input_size: _containers.RepeatedScalarFieldContainer[int]
    output_size: _containers.RepeatedScalarFieldContainer[int]
    num_elements: _containers.RepeatedScalarFieldContainer[int]
    dtype: _containers.RepeatedScalarFieldContainer[int]
    algorithm_bandwidth: _containers.RepeatedScalarFieldContainer[float]
    bus_bandwidth: _containers.RepeatedScalarFieldContainer[float]
    framework_op: _containers.RepeatedScalarFieldContainer[int]
    instruction: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, track: _Optional[_Iterable[int]] = ..., start_ts: _Optional[_Iterable[int]] = ..., duration_ns: _Optional[_Iterable[int]] = ..., operation: _Optional[_Iterable[int]] = ..., algorithm: _Optional[_Iterable[int]] = ..., process_group: _Optional[_Iterable[int]] = ..., replica_group: _Optional[_Iterable[int]] = ..., group_size: _Optional[_Iterable[int]] = ..., sequence_number: _Optional[_Iterable[int]] = ..., input_size: _Optional[_Iterable[int]] = ..., output_size: _Optional[_Iterable[int]] = ..., num_elements: _Optional[_Iterable[int]] = ..., dtype: _Optional[_Iterable[int]] = ..., algorithm_bandwidth: _Optional[_Iterable[float]] = ..., bus_bandwidth: _Optional[_Iterable[float]] = ..., framework_op: _Optional[_Iterable[int]] = ..., instruction: _Optional[_Iterable[int]] = ...) -> None: ...

class CounterColumns(_message.Message):
    __slots__ = ("track", "ts", "value")
    TRACK_FIELD_NUMBER: _ClassVar[int]
    TS_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    track: _containers.RepeatedScalarFieldContainer[int]
    ts: _containers.RepeatedScalarFieldContainer[int]
    value: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, track: _Optional[_Iterable[int]] = ..., ts: _Optional[_Iterable[int]] = ..., value: _Optional[_Iterable[float]] = ...) -> None: ...

class FlowColumns(_message.Message):
    __slots__ = ("src_table", "src_row", "dst_table", "dst_row", "kind")
    SRC_TABLE_FIELD_NUMBER: _ClassVar[int]
    SRC_ROW_FIELD_NUMBER: _ClassVar[int]
    DST_TABLE_FIELD_NUMBER: _ClassVar[int]
    DST_ROW_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    src_table: _containers.RepeatedScalarFieldContainer[int]
    src_row: _containers.RepeatedScalarFieldContainer[int]
    dst_table: _containers.RepeatedScalarFieldContainer[int]
    dst_row: _containers.RepeatedScalarFieldContainer[int]
    kind: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, src_table: _Optional[_Iterable[int]] = ..., src_row: _Optional[_Iterable[int]] = ..., dst_table: _Optional[_Iterable[int]] = ..., dst_row: _Optional[_Iterable[int]] = ..., kind: _Optional[_Iterable[int]] = ...) -> None: ...

class AllocationColumns(_message.Message):
    __slots__ = ("track", "start_ts", "duration_ns", "buffer", "partition", "num_partitions", "start_address", "end_address", "tensor_name", "tensor_kind", "spill", "framework_op")
    TRACK_FIELD_NUMBER: _ClassVar[int]
    START_TS_FIELD_NUMBER: _ClassVar[int]
    DURATION_NS_FIELD_NUMBER: _ClassVar[int]
    BUFFER_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    NUM_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    START_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    END_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    TENSOR_NAME_FIELD_NUMBER: _ClassVar[int]
    TENSOR_KIND_FIELD_NUMBER: _ClassVar[int]
    SPILL_FIELD_NUMBER: _ClassVar[int]
    FRAMEWORK_OP_FIELD_NUMBER: _ClassVar[int]
    track: _containers.RepeatedScalarFieldContainer[int]
    start_ts: _containers.RepeatedScalarFieldContainer[int]
    duration_ns: _containers.RepeatedScalarFieldContainer[int]
    buffer: _containers.RepeatedScalarFieldContainer[int]
    partition: _containers.RepeatedScalarFieldContainer[int]
    num_partitions: _containers.RepeatedScalarFieldContainer[int]
    start_address: _containers.RepeatedScalarFieldContainer[int]
    end_address: _containers.RepeatedScalarFieldContainer[int]
    tensor_name: _containers.RepeatedScalarFieldContainer[int]
    tensor_kind: _containers.RepeatedScalarFieldContainer[int]
    spill: _containers.RepeatedScalarFieldContainer[int]
    framework_op: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, track: _Optional[_Iterable[int]] = ..., start_ts: _Optional[_Iterable[int]] = ..., duration_ns: _Optional[_Iterable[int]] = ..., buffer: _Optional[_Iterable[int]] = ..., partition: _Optional[_Iterable[int]] = ..., num_partitions: _Optional[_Iterable[int]] = ..., start_address: _Optional[_Iterable[int]] = ..., end_address: _Optional[_Iterable[int]] = ..., tensor_name: _Optional[_Iterable[int]] = ..., tensor_kind: _Optional[_Iterable[int]] = ..., spill: _Optional[_Iterable[int]] = ..., framework_op: _Optional[_Iterable[int]] = ...) -> None: ...

class ChunkIndexEntry(_message.Message):
    __slots__ = ("table_id", "offset", "length", "first_row", "rows", "min_ts", "max_end_ts")
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    FIRST_ROW_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    MIN_TS_FIELD_NUMBER: _ClassVar[int]
    MAX_END_TS_FIELD_NUMBER: _ClassVar[int]
    table_id: int
    offset: int
    length: int
    first_row: int
    rows: int
    min_ts: int
    max_end_ts: int
    def __init__(self, table_id: _Optional[int] = ..., offset: _Optional[int] = ..., length: _Optional[int] = ..., first_row: _Optional[int] = ..., rows: _Optional[int] = ..., min_ts: _Optional[int] = ..., max_end_ts: _Optional[int] = ...) -> None: ...

class Footer(_message.Message):
    __slots__ = ("chunks", "table_rows", "dropped_events", "min_ts", "max_ts", "metadata")
    class TableRowsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class DroppedEventsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    TABLE_ROWS_FIELD_NUMBER: _ClassVar[int]
    DROPPED_EVENTS_FIELD_NUMBER: _ClassVar[int]
    MIN_TS_FIELD_NUMBER: _ClassVar[int]
    MAX_TS_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    chunks: _containers.RepeatedCompositeFieldContainer[ChunkIndexEntry]
    table_rows: _containers.ScalarMap[str, int]
    dropped_events: _containers.ScalarMap[str, int]
    min_ts: int
    max_ts: int
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, chunks: _Optional[_Iterable[_Union[ChunkIndexEntry, _Mapping]]] = ..., table_rows: _Optional[_Mapping[str, int]] = ..., dropped_events: _Optional[_Mapping[str, int]] = ..., min_ts: _Optional[int] = ..., max_ts: _Optional[int] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...
