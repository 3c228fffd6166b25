from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Void(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class IdleTime(_message.Message):
    __slots__ = ("seconds", "conditional_stop")
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    CONDITIONAL_STOP_FIELD_NUMBER: _ClassVar[int]
    seconds: float
    conditional_stop: bool
    def __init__(self, seconds: _Optional[float] = ..., conditional_stop: _Optional[bool] = ...) -> None: ...

class StopRequest(_message.Message):
    __slots__ = ("timeout", "if_idle_for")
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    IF_IDLE_FOR_FIELD_NUMBER: _ClassVar[int]
    timeout: float
    if_idle_for: float
    def __init__(self, timeout: _Optional[float] = ..., if_idle_for: _Optional[float] = ...) -> None: ...

class Request(_message.Message):
    __slots__ = ("task_id", "task")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    task: bytes
    def __init__(self, task_id: _Optional[str] = ..., task: _Optional[bytes] = ...) -> None: ...

class Response(_message.Message):
    __slots__ = ("ack", "nack", "result", "exception")
    ACK_FIELD_NUMBER: _ClassVar[int]
    NACK_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    EXCEPTION_FIELD_NUMBER: _ClassVar[int]
    ack: Ack
    nack: Nack
    result: bytes
    exception: bytes
    def __init__(self, ack: _Optional[_Union[Ack, _Mapping]] = ..., nack: _Optional[_Union[Nack, _Mapping]] = ..., result: _Optional[bytes] = ..., exception: _Optional[bytes] = ...) -> None: ...

class Ack(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Nack(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...
